import { Session } from 'node:inspector';
import type { AddressInfo, Server } from 'node:net';

/*
 * The parent's side of this protocol is procs.ts. A bench child listens on a loopback port,
 * says so over IPC, answers `stats` requests with its own CPU time and memory, and exits when
 * the parent goes away (so an interrupted run leaves nothing behind).
 */

export interface ProcStats {
  /** User + system CPU time of this process since it started, in milliseconds. */
  cpuMs: number;
  rssBytes: number;
  /** Peak resident set size since the process started. */
  maxRssBytes: number;
  /** Whatever else the child counts (the fake upstream's summarizer figures). */
  extra?: Record<string, number>;
  /** Only when asked for (bench/soak.ts). */
  memory?: MemoryStats;
}

/**
 * The heap and the open handles. `afterGc` measures after full garbage collections (where
 * --expose-gc allows them): what a process holds at rest.
 */
export type MemoryRequest = 'now' | 'afterGc';

export interface MemoryStats {
  heapUsedBytes: number;
  heapTotalBytes: number;
  externalBytes: number;
  /** Active resources by type (`TCPSocketWrap`, `Timeout`...), as process.getActiveResourcesInfo() lists them. */
  handles: Record<string, number>;
}

export type ToChild = { type: 'stats'; id: number; memory?: MemoryRequest } | { type: 'profile'; id: number; action: 'start' | 'stop' };
export type FromChild =
  { type: 'ready'; port: number } | { type: 'stats'; id: number; stats: ProcStats } | { type: 'profile'; id: number; profile?: unknown };

export function ownStats(extra?: Record<string, number>): ProcStats {
  const cpu = process.cpuUsage();
  return {
    cpuMs: (cpu.user + cpu.system) / 1000,
    rssBytes: process.memoryUsage.rss(),
    maxRssBytes: process.resourceUsage().maxRSS * 1024,
    extra,
  };
}

/** Announces the server's port to the parent and serves stats until the parent disconnects. */
export function announce(server: Server, extra?: () => Record<string, number>): void {
  const send = (message: FromChild) => process.send?.(message);
  process.on('message', (message: ToChild) => {
    if (message?.type === 'stats' && message.memory)
      void memoryStats(message.memory).then((memory) => send({ type: 'stats', id: message.id, stats: { ...ownStats(extra?.()), memory } }));
    else if (message?.type === 'stats') send({ type: 'stats', id: message.id, stats: ownStats(extra?.()) });
    if (message?.type === 'profile') void profile(message.action).then((p) => send({ type: 'profile', id: message.id, profile: p }));
  });
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready', port: (server.address() as AddressInfo).port });
}

async function memoryStats(when: MemoryRequest): Promise<MemoryStats> {
  const gc = (globalThis as { gc?: () => void }).gc;
  // A turn of the event loop between collections lets finalizers and closing handles run.
  for (let i = 0; i < 3 && gc && when === 'afterGc'; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  const memory = process.memoryUsage();
  const handles: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) handles[type] = (handles[type] ?? 0) + 1;
  return { heapUsedBytes: memory.heapUsed, heapTotalBytes: memory.heapTotal, externalBytes: memory.external, handles };
}

let session: Session | undefined;

/** The V8 CPU profiler over the inspector, started and stopped on request (bench/profile.ts). */
async function profile(action: 'start' | 'stop'): Promise<unknown> {
  if (!session) {
    session = new Session();
    session.connect();
  }
  const post = (method: string) =>
    new Promise<any>((resolve, reject) => session!.post(method, (err, result) => (err ? reject(err) : resolve(result))));
  if (action === 'start') {
    await post('Profiler.enable');
    await post('Profiler.start');
    return undefined;
  }
  return (await post('Profiler.stop')).profile;
}

/** Listens on a free loopback port. */
export function listenLoopback(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
}
