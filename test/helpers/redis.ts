import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { freePort } from './ports.js';

/** Whether a redis-server binary is on PATH (.ci/run installs one from Debian's packages). */
export const HAVE_REDIS = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;

export interface TestRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
  /** Starts it again on the same port (after stop). */
  start(): Promise<void>;
}

/** A real redis-server of its own on a loopback port, nothing persisted. */
export async function startRedis(): Promise<TestRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis-server did not start: ${output}`)), 10_000);
      child!.stdout!.on('data', (c) => {
        output += c;
        if (output.includes('Ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child!.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited with ${code}: ${output}`));
      });
    });
  };
  const stop = async () => {
    // After SIGKILL, exitCode stays null and signalCode is set: either one means it is gone.
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, port, stop, start };
}
