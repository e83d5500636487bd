import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { FromChild, MemoryRequest, ProcStats, ToChild } from './child.js';

export type { ProcStats } from './child.js';

/** A bench process (fake upstream, floor proxy, gateway) running in its own child process. */
export interface BenchProcess {
  name: string;
  origin: string;
  /** Request headers this target needs besides the client's own (Portkey: which provider, which host). */
  headers?: Record<string, string>;
  pid: number;
  /** `memory`: with the heap and open handles, measured now or after full collections (bench/soak.ts). */
  stats(options?: { memory?: MemoryRequest }): Promise<ProcStats>;
  /** Starts the V8 CPU profiler in the child; stopping returns its profile (bench/profile.ts). */
  profile(action: 'start' | 'stop'): Promise<unknown>;
  stop(): Promise<void>;
}

/**
 * Stops of the processes that do not exit with the bench on their own (the gateways as `npm start`
 * runs them, the peers): run.ts calls them when it gives up or is interrupted.
 */
const orphanable = new Set<() => Promise<void>>();

/** Registers a stop; the returned stop runs it once and unregisters it. */
export function stopOnExit(stop: () => Promise<void>): () => Promise<void> {
  const once = () => {
    orphanable.delete(once);
    return stop();
  };
  orphanable.add(once);
  return once;
}

export async function stopAll(): Promise<void> {
  await Promise.allSettled([...orphanable].map((stop) => stop()));
}

const READY_TIMEOUT_MS = 20_000;
const STATS_TIMEOUT_MS = 5_000;

/**
 * Starts `bench/<script>` under `node --import tsx`, passing `config` as JSON in argv. stdout
 * goes to /dev/null (the gateway's log lines are written there, as to any file, at full cost)
 * unless `onStdoutLine` reads it; stderr is kept for the error message if the child fails.
 */
export async function startProcess(
  name: string,
  script: string,
  config: unknown,
  nodeFlags: string[] = [],
  onStdoutLine?: (line: string) => void,
): Promise<BenchProcess> {
  const path = fileURLToPath(new URL(script, import.meta.url));
  const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', path, JSON.stringify(config)], {
    stdio: ['ignore', onStdoutLine ? 'pipe' : 'ignore', 'pipe', 'ipc'],
  });
  if (onStdoutLine) createInterface({ input: child.stdout!, crlfDelay: Infinity }).on('line', onStdoutLine);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const port = await waitReady(child, name, () => stderr);
  let nextId = 0;
  return {
    name,
    origin: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    stats: (options) => requestStats(child, name, nextId++, options?.memory),
    profile: (action) => requestProfile(child, name, nextId++, action),
    stop: () => stopChild(child),
  };
}

function waitReady(child: ChildProcess, name: string, stderr: () => string): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`${name} did not start within ${READY_TIMEOUT_MS} ms`)), READY_TIMEOUT_MS);
    const onMessage = (message: FromChild) => {
      if (message?.type !== 'ready') return;
      cleanup();
      resolve(message.port);
    };
    const onExit = (code: number | null) => fail(new Error(`${name} exited with ${code} before it was ready:\n${stderr()}`));
    const cleanup = () => {
      clearTimeout(timer);
      child.off('message', onMessage).off('exit', onExit);
    };
    const fail = (err: Error) => {
      cleanup();
      child.kill();
      reject(err);
    };
    child.on('message', onMessage).on('exit', onExit);
  });
}

function requestStats(child: ChildProcess, name: string, id: number, memory: MemoryRequest | undefined): Promise<ProcStats> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off('message', onMessage);
      reject(new Error(`${name} did not report its stats within ${STATS_TIMEOUT_MS} ms`));
    }, STATS_TIMEOUT_MS);
    const onMessage = (message: FromChild) => {
      if (message?.type !== 'stats' || message.id !== id) return;
      clearTimeout(timer);
      child.off('message', onMessage);
      resolve(message.stats);
    };
    child.on('message', onMessage);
    child.send({ type: 'stats', id, ...(memory ? { memory } : {}) } satisfies ToChild);
  });
}

function requestProfile(child: ChildProcess, name: string, id: number, action: 'start' | 'stop'): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off('message', onMessage);
      reject(new Error(`${name} did not answer a profile request within ${STATS_TIMEOUT_MS * 4} ms`));
    }, STATS_TIMEOUT_MS * 4);
    const onMessage = (message: FromChild) => {
      if (message?.type !== 'profile' || message.id !== id) return;
      clearTimeout(timer);
      child.off('message', onMessage);
      resolve(message.profile);
    };
    child.on('message', onMessage);
    child.send({ type: 'profile', id, action });
  });
}

/** Disconnecting lets the child exit on its own (and write a --cpu-prof profile); SIGKILL if it lingers. */
function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    if (child.connected) child.disconnect();
    else child.kill('SIGTERM');
  });
}

/**
 * Runs `bench/<script>` to completion and returns the one `result` message it sends: for
 * measurements that need a fresh process of their own (flags such as --expose-gc, a clean heap).
 */
export function runOnce<T>(name: string, script: string, config: unknown, nodeFlags: string[], timeoutMs: number): Promise<T> {
  const path = fileURLToPath(new URL(script, import.meta.url));
  const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', path, JSON.stringify(config)], {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  return new Promise((resolve, reject) => {
    let result: T | undefined;
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('message', (message: { type: string; result: T }) => {
      if (message?.type === 'result') result = message.result;
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (result !== undefined) resolve(result);
      else reject(new Error(`${name} ended (${signal ?? code}) without a result:\n${stderr}`));
    });
  });
}
