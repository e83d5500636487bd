import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

/** The built gateway (dist/, made by `npm test`'s pretest build). */
export const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** performance.now() when the process exited. */
  at: number;
}

export interface Proc {
  child: ChildProcess;
  /** stdout and stderr as they arrived, interleaved. */
  output(): string;
  exited: Promise<Exit>;
  /** Resolves with the exit, or with 'still running' after `ms`: a wait that always ends. */
  exitWithin(ms: number): Promise<Exit | 'still running'>;
}

/** Starts a command with a clean environment (PATH plus `env`), capturing its output. */
export function runProcess(command: string, args: string[], env: Record<string, string>, options: SpawnOptions = {}): Proc {
  const child = spawn(command, args, { env: { PATH: process.env.PATH ?? '', ...env }, ...options });
  let output = '';
  child.stdout?.on('data', (c) => (output += c));
  child.stderr?.on('data', (c) => (output += c));
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, at: performance.now() })));
  return {
    child,
    output: () => output,
    exited,
    exitWithin: (ms) => {
      let timer: NodeJS.Timeout;
      const late = new Promise<'still running'>((r) => (timer = setTimeout(() => r('still running'), ms)));
      return Promise.race([exited, late]).finally(() => clearTimeout(timer));
    },
  };
}

/** `node ...nodeArgs dist/main.js ...args` */
export function runGateway(args: string[], env: Record<string, string>, nodeArgs: string[] = []): Proc {
  return runProcess(process.execPath, [...nodeArgs, MAIN, ...args], env);
}

/** The gateway's origin, once its "Server listening" line is out. */
export async function listening(proc: Proc, timeout = 15_000): Promise<string> {
  const pattern = /Server listening at (http:\/\/[^\s"]+)/;
  await expect.poll(() => pattern.test(proc.output()), { timeout }).toBe(true);
  return pattern.exec(proc.output())![1];
}

/** The JSON log lines printed so far (other lines skipped). */
export function jsonLines(proc: Proc): any[] {
  return proc
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line));
}

/** Whether something accepts TCP connections on the loopback port. */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Whether a process with this id is still alive. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
