// What the by-hand agent scripts (try-agents, try-multi, try-preserved, try-gemini, try-local)
// share: writing files (and the generated ones a session reads), running a CLI to its end
// (bounded), and a real gateway process on a loopback port.
import { spawn, type SpawnOptions } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export interface RunResult {
  /** The exit code, or the signal that ended it. */
  code: number | string;
  /** stdout and stderr, interleaved as they came. */
  out: string;
}

export interface GatewayProcess {
  origin: string;
  stop: () => Promise<void>;
  /** Everything the gateway has written so far. */
  log: () => string;
}

export function write(file: string, text: string): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
}

/** Runs a command to its end, bounded; resolves with its exit code and output. */
export function run(cmd: string, args: string[], options: SpawnOptions, timeoutMs: number): Promise<RunResult> {
  return new Promise((resolvePromise) => {
    const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.stderr.on('data', (c: Buffer) => (out += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code: code ?? signal ?? 'unknown', out });
    });
  });
}

/**
 * The gateway as a process in front of `upstreamOrigin`, on a free loopback port: from source
 * (tsx) by default, or the built dist/ with `built: true`. Its UPSTREAM_URL is the origin + `/v1`,
 * or the origin alone with `path: ''` (the Gemini API's base URL); `env` sets more of its
 * variables (COMPACTION_TRANSLATE_OVERFLOW=false); `node` is the Node binary it runs on (this
 * one's by default). Resolves once it listens.
 */
export async function startGateway(
  upstreamOrigin: string,
  {
    built = false,
    path = '/v1',
    env = {},
    node = process.execPath,
  }: { built?: boolean; path?: string; env?: Record<string, string>; node?: string } = {},
): Promise<GatewayProcess> {
  return launch(
    built,
    [],
    {
      UPSTREAM_URL: `${upstreamOrigin}${path}`,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      UPSTREAM_API_KEY: '',
      GATEWAY_API_KEYS: '',
      ...env,
    },
    node,
  );
}

/**
 * The gateway as a process with `configFile` (`--config`), built dist/ by default. The file sets
 * the upstreams, keys and port (`server: {host: 127.0.0.1, port: 0}`); the upstream and key
 * variables are emptied so that only the file speaks. Resolves once it listens.
 */
export async function startGatewayWith(configFile: string, { built = true }: { built?: boolean } = {}): Promise<GatewayProcess> {
  return launch(built, ['--config', configFile], {
    LOG_LEVEL: 'info',
    UPSTREAM_URL: '',
    UPSTREAM_API_KEY: '',
    GATEWAY_API_KEYS: '',
    PORT: '',
    HOST: '',
  });
}

async function launch(built: boolean, args: string[], env: Record<string, string>, node = process.execPath): Promise<GatewayProcess> {
  const entry = built ? [join(ROOT, 'dist', 'main.js')] : ['--import', 'tsx', join(ROOT, 'src', 'main.ts')];
  const child = spawn(node, [...entry, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const origin = await new Promise<string>((resolveOrigin, reject) => {
    const timer = setTimeout(() => reject(new Error(`the gateway did not start: ${log}`)), 30_000);
    child.stdout.on('data', (c: Buffer) => {
      log += c;
      const m = /listening at (http:\/\/127\.0\.0\.1:\d+)/i.exec(log);
      if (m) {
        clearTimeout(timer);
        resolveOrigin(m[1]);
      }
    });
    child.stderr.on('data', (c: Buffer) => (log += c));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the gateway exited (${code}): ${log}`));
    });
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(killer);
  };
  return { origin, stop, log: () => log };
}

/** A generated source file of about 9 KB, the `i`th a scripted session asks the CLI to read. */
export function moduleText(i: number, label: string): string {
  const lines = [`// module${i}.ts: generated for ${label}`];
  for (let n = 0; lines.join('\n').length < 9_000; n++)
    lines.push(`export function step${i}_${n}(value: number): number {\n  return value * ${n + 1} + ${i};\n}`);
  return lines.join('\n');
}
