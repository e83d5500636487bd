import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { stopOnExit, type BenchProcess, type ProcStats } from './procs.js';
import { freePort } from '../test/helpers/ports.js';

/*
 * The gateway as `npm start` runs it: `node scripts/start.mjs` (the built dist/ in that same
 * process), configured by its environment, its log lines on stdout (/dev/null here), nothing of
 * the bench loaded into it. Its CPU time and memory are read from /proc/PID, as the independent
 * harness (../shared/peer-bench) reads every proxy's: user + system time of the process.
 */

const START = fileURLToPath(new URL('../scripts/start.mjs', import.meta.url));
const USER_HZ = 100;
const READY_TIMEOUT_MS = 20_000;

export async function startDistGateway(name: string, env: Record<string, string>, nodeFlags: string[] = []): Promise<BenchProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [...nodeFlags, START], {
    env: { ...process.env, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const origin = `http://127.0.0.1:${port}`;
  const stop = stopOnExit(
    () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  );
  const until = performance.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited (${child.exitCode}): ${stderr}`);
    try {
      const res = await request(`${origin}/healthz`);
      await res.body.text();
      if (res.statusCode === 200) break;
    } catch {
      // not listening yet
    }
    if (performance.now() > until) {
      await stop();
      throw new Error(`${name} did not start within ${READY_TIMEOUT_MS} ms: ${stderr}`);
    }
    await sleep(50);
  }
  return {
    name,
    origin,
    pid: child.pid!,
    stats: async () => procStats(child.pid!),
    profile: () => Promise.reject(new Error(`${name} runs as npm start does: no profiler over IPC (use bench/profile.ts)`)),
    stop,
  };
}

/** User + system CPU time (/proc/PID/stat), resident and peak resident memory (/proc/PID/status). */
export function procStats(pid: number): ProcStats {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields 14 and 15 of the line: 12 and 13 after the command's closing parenthesis and its space.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { cpuMs: ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ, rssBytes: kb('VmRSS'), maxRssBytes: kb('VmHWM') };
}
