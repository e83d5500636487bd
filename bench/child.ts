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
}

export type ToChild = { type: 'stats'; id: number };
export type FromChild = { type: 'ready'; port: number } | { type: 'stats'; id: number; stats: ProcStats };

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
    if (message?.type === 'stats') send({ type: 'stats', id: message.id, stats: ownStats(extra?.()) });
  });
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready', port: (server.address() as AddressInfo).port });
}

/** Listens on a free loopback port. */
export function listenLoopback(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
}
