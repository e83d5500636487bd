// What the by-hand agent scripts (try-agents, try-overflow, try-multi) share: writing files,
// running a CLI to its end (bounded), and a real gateway process on a loopback port.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export function write(file, text) {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
}

/** Runs a command to its end, bounded; resolves with its exit code and output. */
export function run(cmd, args, options, timeoutMs) {
  return new Promise((resolvePromise) => {
    const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code: code ?? signal, out });
    });
  });
}

/**
 * The gateway as a process in front of `upstreamOrigin`, on a free loopback port: from source
 * (tsx) by default, or the built dist/ with `built: true`. Its UPSTREAM_URL is the origin + `/v1`,
 * or the origin alone with `path: ''` (the Gemini API's base URL). Resolves once it listens.
 */
export async function startGateway(upstreamOrigin, { built = false, path = '/v1' } = {}) {
  return launch(built, [], { UPSTREAM_URL: `${upstreamOrigin}${path}`, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', UPSTREAM_API_KEY: '', GATEWAY_API_KEYS: '' });
}

/**
 * The gateway as a process with `configFile` (`--config`), built dist/ by default. The file sets
 * the upstreams, keys and port (`server: {host: 127.0.0.1, port: 0}`); the upstream and key
 * variables are emptied so that only the file speaks. Resolves once it listens.
 */
export async function startGatewayWith(configFile, { built = true } = {}) {
  return launch(built, ['--config', configFile], { LOG_LEVEL: 'info', UPSTREAM_URL: '', UPSTREAM_API_KEY: '', GATEWAY_API_KEYS: '', PORT: '', HOST: '' });
}

async function launch(built, args, env) {
  const entry = built ? [join(ROOT, 'dist', 'main.js')] : ['--import', 'tsx', join(ROOT, 'src', 'main.ts')];
  const child = spawn(process.execPath, [...entry, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const origin = await new Promise((resolveOrigin, reject) => {
    const timer = setTimeout(() => reject(new Error(`the gateway did not start: ${log}`)), 30_000);
    child.stdout.on('data', (c) => {
      log += c;
      const m = /listening at (http:\/\/127\.0\.0\.1:\d+)/i.exec(log);
      if (m) { clearTimeout(timer); resolveOrigin(m[1]); }
    });
    child.stderr.on('data', (c) => (log += c));
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`the gateway exited (${code}): ${log}`)); });
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(killer);
  };
  return { origin, stop, log: () => log };
}
