#!/usr/bin/env tsx
// npm run check:package: the npm package installs and runs with production dependencies only.
//
//   pack       `npm pack` in a copy of the project without dist/ (its prepack builds it)
//   contents   the tarball holds dist/**/*.js, config/default.yaml, docs/*.md, package.json, README.md and
//              LICENSE, nothing else (no src, test, bench, source maps); dist/main.js starts with a
//              shebang and is the `compaction-gateway` bin
//   install    into an empty folder: `npm ci --omit=dev --offline` from the npm cache the project's
//              `npm ci` filled, with the versions the project's lockfile pins (the package carries
//              no lockfile; see lockFor); none of the lockfile's dev-only packages is installed
//   user install  into another empty folder as a user installs it: `npm install` of the tarball
//              alone, no lockfile and no overrides (npm applies only the root's), resolved from the
//              registry (the cache first); on this Node, no EBADENGINE warning
//   --version  node_modules/.bin/compaction-gateway --version names the package's version
//   serve      started from another empty folder on a loopback port: /healthz answers 200, it
//              reads the config file it ships, and a chat request reaches a stand-in upstream
//   SIGTERM    exits 0 and frees its port
//
// Each step needs the one before; after a failure the rest are not run. Exits 1 on a failure.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/helpers/ports.js';
import { startStandIn, type StandIn } from '../test/helpers/provider.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const LIMITS = Object.freeze({
  totalMs: 6 * 60_000,
  packMs: 3 * 60_000,
  installMs: 3 * 60_000,
  commandMs: 30_000,
  startMs: 30_000,
  requestMs: 10_000,
  stopMs: 15_000,
});
/** Not copied for packing: installed, built, generated or local. */
const NOT_COPIED = new Set(['.git', 'node_modules', 'dist', 'coverage', 'reports', '.stryker-tmp', '.vitest-results.json']);
/** What the tarball may hold besides dist/**\/*.js and docs/*.md (npm adds package.json, README and LICENSE itself). */
const SHIPPED = new Set(['package.json', 'README.md', 'LICENSE', 'config/default.yaml']);

class Failed extends Error {}
const fail = (message: string): never => {
  throw new Failed(message);
};

const started = Date.now();
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const work = mkdtempSync(join(tmpdir(), 'check-package-'));
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) killGroup(child, 'SIGKILL');
  rmSync(work, { recursive: true, force: true, maxRetries: 3 });
});
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => process.exit(1));

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // already gone
  }
}

interface Result {
  code: number | null;
  output: string;
}

/** Runs a command to its end within `timeoutMs` (and the overall limit); never rejects on an exit code. */
function run(
  cmd: string,
  args: string[],
  { cwd, timeoutMs = LIMITS.commandMs, env = process.env }: { cwd: string; timeoutMs?: number; env?: NodeJS.ProcessEnv },
): Promise<Result> {
  const budget = Math.min(timeoutMs, started + LIMITS.totalMs - Date.now());
  if (budget <= 0) fail(`overall time limit of ${seconds(LIMITS.totalMs)} reached before: ${cmd} ${args.join(' ')}`);
  return new Promise((resolvePromise, reject) => {
    // Its own process group, so a time-out also ends what it started (npm's sh and tsc).
    const child = spawn(cmd, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let output = '';
    const keep = (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-100_000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => {
      killGroup(child, 'SIGKILL');
      reject(new Failed(`${cmd} ${args.join(' ')} did not finish within ${seconds(budget)}:\n${tail(output)}`));
    }, budget);
    child.once('error', (err) => reject(new Failed(`cannot run ${cmd}: ${err.message}`)));
    child.once('close', (code) => {
      clearTimeout(timer);
      children.delete(child);
      resolvePromise({ code, output });
    });
  });
}

async function must(what: string, cmd: string, args: string[], options: Parameters<typeof run>[2]): Promise<string> {
  const { code, output } = await run(cmd, args, options);
  if (code !== 0) fail(`${what} exited ${code}:\n${tail(output)}`);
  return output;
}

const tail = (text: string, lines = 20) => text.trimEnd().split('\n').slice(-lines).join('\n');
const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8'));

interface Lockfile {
  packages: Record<string, { dev?: boolean; [key: string]: unknown }>;
}

const pkg = readJson(join(ROOT, 'package.json'));
const lock: Lockfile = readJson(join(ROOT, 'package-lock.json'));
const ctx: { tarball?: string; app?: string; bin?: string } = {};

// --- the steps -------------------------------------------------------------------------------

async function pack(): Promise<string> {
  const project = join(work, 'project');
  mkdirSync(project);
  for (const entry of readdirSync(ROOT)) {
    if (!NOT_COPIED.has(entry) && !entry.endsWith('.tgz') && !entry.endsWith('.log'))
      cpSync(join(ROOT, entry), join(project, entry), { recursive: true });
  }
  // The build's tools; nothing is written into them.
  symlinkSync(join(ROOT, 'node_modules'), join(project, 'node_modules'), 'dir');
  const out = join(work, 'out');
  mkdirSync(out);
  const t0 = Date.now();
  await must('npm pack', 'npm', ['pack', '--pack-destination', out, '--no-audit', '--no-fund'], { cwd: project, timeoutMs: LIMITS.packMs });
  const made = readdirSync(out).filter((f) => f.endsWith('.tgz'));
  if (made.length !== 1) fail(`npm pack left ${made.length} tarballs: ${made.join(', ')}`);
  ctx.tarball = join(out, made[0]);
  const kB = (readFileSync(ctx.tarball).length / 1000).toFixed(0);
  return `${made[0]}, ${kB} kB, built and packed in ${seconds(Date.now() - t0)}`;
}

async function contents(): Promise<string> {
  const listing = await must('tar -tzf', 'tar', ['-tzf', ctx.tarball!], { cwd: work });
  const files = listing
    .split('\n')
    .filter((line) => line && !line.endsWith('/'))
    .map((line) => line.replace(/^package\//, ''));
  const stray = files.filter((f) => !SHIPPED.has(f) && !/^dist\/.+\.js$/.test(f) && !/^docs\/[\w-]+\.md$/.test(f));
  if (stray.length) fail(`${stray.length} files that should not ship: ${stray.slice(0, 10).join(', ')}${stray.length > 10 ? ', …' : ''}`);
  const missing = [...SHIPPED, 'dist/main.js', 'docs/configuration.md'].filter((f) => !files.includes(f));
  if (missing.length) fail(`missing from the tarball: ${missing.join(', ')}`);
  const shipped = JSON.parse(
    await must('reading package.json from the tarball', 'tar', ['-xzOf', ctx.tarball!, 'package/package.json'], { cwd: work }),
  );
  if (shipped.bin?.['compaction-gateway'] !== 'dist/main.js')
    fail(`bin.compaction-gateway is ${JSON.stringify(shipped.bin)}, not dist/main.js`);
  const main = await must('reading dist/main.js from the tarball', 'tar', ['-xzOf', ctx.tarball!, 'package/dist/main.js'], { cwd: work });
  if (!main.startsWith('#!/usr/bin/env node\n')) fail(`dist/main.js starts with ${JSON.stringify(main.slice(0, 30))}, not a node shebang`);
  return `${files.length} files: ${files.filter((f) => f.startsWith('dist/')).length} in dist/, ${[...SHIPPED].join(', ')}; bin compaction-gateway -> dist/main.js (shebang)`;
}

/**
 * The install folder's own package-lock: the tarball, plus every entry of the project's lockfile
 * that is not dev-only. The tree is the same (the gateway's dependencies hoist to the top as they
 * do in the project), so `npm ci` installs exactly what the project's tests ran against, from the
 * cache, with no registry metadata to fetch. The project's `overrides` come along: the lockfile
 * was resolved under them (npm applies only the root's, so a user's own `npm install` of the
 * tarball resolves without them).
 */
function lockFor(spec: string) {
  const packages: Record<string, unknown> = {
    '': { name: 'check-package-install', dependencies: { [pkg.name]: spec }, overrides: pkg.overrides },
    [`node_modules/${pkg.name}`]: {
      version: pkg.version,
      resolved: spec,
      license: pkg.license,
      dependencies: pkg.dependencies,
      bin: pkg.bin,
      engines: pkg.engines,
    },
  };
  for (const [path, meta] of Object.entries(lock.packages)) if (path && !meta.dev) packages[path] = meta;
  return { name: 'check-package-install', lockfileVersion: 3, requires: true, packages };
}

async function install(): Promise<string> {
  const app = join(work, 'app');
  mkdirSync(app);
  const spec = `file:${ctx.tarball!}`;
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'check-package-install', private: true, dependencies: { [pkg.name]: spec }, overrides: pkg.overrides }, null, 2),
  );
  writeFileSync(join(app, 'package-lock.json'), JSON.stringify(lockFor(spec), null, 2));
  const t0 = Date.now();
  const { code, output } = await run('npm', ['ci', '--omit=dev', '--offline', '--no-audit', '--no-fund'], {
    cwd: app,
    timeoutMs: LIMITS.installMs,
  });
  if (code !== 0) {
    const hint = /ENOTCACHED/.test(output) ? '\n(the npm cache lacks a package: run `npm ci` in the project first)' : '';
    fail(`npm ci --omit=dev --offline exited ${code}:\n${tail(output)}${hint}`);
  }
  const installMs = Date.now() - t0;
  const at = (path: string) => existsSync(join(app, path, 'package.json'));
  const dev = Object.entries(lock.packages)
    .filter(([path, meta]) => path && meta.dev)
    .map(([path]) => path);
  const shipped = dev.filter(at);
  if (shipped.length) fail(`${shipped.length} dev-only packages installed: ${shipped.slice(0, 10).join(', ')}`);
  const absent = Object.keys(pkg.dependencies ?? {}).filter((name) => !at(`node_modules/${name}`));
  if (absent.length) fail(`dependencies not installed: ${absent.join(', ')}`);
  ctx.app = app;
  ctx.bin = join(app, 'node_modules', '.bin', 'compaction-gateway');
  if (!existsSync(ctx.bin)) fail('npm ci made no node_modules/.bin/compaction-gateway');
  const count = readdirSync(join(app, 'node_modules')).filter((d) => !d.startsWith('.')).length;
  return `${count} top-level packages in ${seconds(installMs)}, none of the lockfile's ${dev.length} dev-only ones`;
}

/**
 * What a user's `npm install` of the tarball resolves, without the project's lockfile or its
 * `overrides`: every package it installs must accept this Node (the test runs on the oldest
 * major `engines` allows), so npm prints no EBADENGINE warning.
 */
async function userInstall(): Promise<string> {
  const app = join(work, 'user');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'check-package-user', private: true }, null, 2));
  const t0 = Date.now();
  const { code, output } = await run('npm', ['install', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund', ctx.tarball!], {
    cwd: app,
    timeoutMs: LIMITS.installMs,
  });
  if (code !== 0) fail(`npm install of the tarball exited ${code}:\n${tail(output)}`);
  const engines = output.split('\n').filter((line) => /EBADENGINE/.test(line));
  if (engines.length)
    fail(
      `npm install on Node ${process.versions.node} warned EBADENGINE (pin or replace the dependency that pulls the package in):\n${tail(output, 40)}`,
    );
  const count = readdirSync(join(app, 'node_modules')).filter((d) => !d.startsWith('.')).length;
  const warnings = output.split('\n').filter((line) => /^npm warn/i.test(line)).length;
  return `${count} top-level packages on Node ${process.versions.node} in ${seconds(Date.now() - t0)}, no EBADENGINE (${warnings} other npm warnings)`;
}

/** The gateway's environment: nothing from this shell but PATH and HOME. */
const gatewayEnv = (extra: Record<string, string>) => ({
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? work,
  NODE_ENV: 'production',
  ...extra,
});

async function version(): Promise<string> {
  const out = (await must('compaction-gateway --version', ctx.bin!, ['--version'], { cwd: work, env: gatewayEnv({}) })).trim();
  if (out !== `compaction-gateway ${pkg.version}`) fail(`--version said ${JSON.stringify(out)}, not "compaction-gateway ${pkg.version}"`);
  return out;
}

interface Running {
  child: ChildProcess;
  origin: string;
  port: number;
  output(): string;
  exited: Promise<number | null>;
}
let gateway: Running | undefined;
let upstream: StandIn | undefined;

/** The project's stand-in provider on loopback (test/helpers/provider.ts: each API's rules and errors), its answer known. */
function startUpstream(): Promise<StandIn> {
  return startStandIn({ reply: () => ({ text: 'answer from the stand-in' }) });
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((ok) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => ok(!socket.destroy()));
    socket.once('error', () => ok(false));
  });
}

async function fetchWithin(url: string, init?: RequestInit): Promise<Response> {
  return fetch(url, { ...init, signal: AbortSignal.timeout(LIMITS.requestMs) });
}

async function serve(): Promise<string> {
  upstream = await startUpstream();
  const port = await freePort();
  const cwd = join(work, 'elsewhere');
  mkdirSync(cwd);
  const child = spawn(ctx.bin!, [], {
    cwd,
    env: gatewayEnv({ HOST: '127.0.0.1', PORT: String(port), UPSTREAM_URL: upstream.baseUrl }),
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c));
  child.stderr.on('data', (c: Buffer) => (output += c));
  const exited = new Promise<number | null>((ok) => child.once('exit', (code) => ok(code)));
  gateway = { child, port, origin: `http://127.0.0.1:${port}`, output: () => output, exited };
  let gone = false;
  void exited.then(() => (gone = true));
  const t0 = Date.now();
  let status = 0;
  // Polled until it answers, it exits, or the start limit passes: at most startMs / 100 tries.
  for (let tries = 0; tries < LIMITS.startMs / 100 && !gone && status !== 200; tries++) {
    status = await fetchWithin(`${gateway.origin}/healthz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status !== 200) await sleep(100);
  }
  if (status !== 200) fail(`${gone ? 'it exited' : `no 200 from /healthz within ${seconds(LIMITS.startMs)}`}; it said:\n${tail(output)}`);
  const startMs = Date.now() - t0;
  const shippedConfig = join(ctx.app!, 'node_modules', pkg.name, 'config', 'default.yaml');
  // Log lines reach the pipe a moment after the port answers: waited for, 2 s at most.
  for (let tries = 0; tries < 20 && !output.includes(shippedConfig); tries++) await sleep(100);
  if (!output.includes(shippedConfig)) fail(`its start-up lines do not name the config it ships (${shippedConfig}):\n${tail(output)}`);
  const res = await fetchWithin(`${gateway.origin}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-check' },
    body: JSON.stringify({ model: 'check-model', messages: [{ role: 'user', content: 'hello' }] }),
  });
  const text = await res.text();
  if (res.status !== 200 || !text.includes('answer from the stand-in')) fail(`a chat request got ${res.status}: ${text.slice(0, 300)}`);
  const calls = upstream.calls();
  if (calls.length !== 1 || calls[0].json?.model !== 'check-model')
    fail(`the stand-in saw ${JSON.stringify(calls.map((c) => ({ url: c.url, model: c.json?.model })))}`);
  return `/healthz 200 after ${seconds(startMs)} on 127.0.0.1:${port}, config from the package's config/default.yaml, a chat request answered by the stand-in`;
}

async function stop(): Promise<string> {
  const g = gateway!;
  const t0 = Date.now();
  g.child.kill('SIGTERM');
  const code = await Promise.race([g.exited, sleep(LIMITS.stopMs).then(() => 'still running' as const)]);
  if (code === 'still running') fail(`still running ${seconds(LIMITS.stopMs)} after SIGTERM:\n${tail(g.output())}`);
  if (code !== 0) fail(`exited ${code} after SIGTERM:\n${tail(g.output())}`);
  if (await portOpen(g.port)) fail(`port ${g.port} still accepts connections after the exit`);
  return `exit 0 after ${seconds(Date.now() - t0)}, port ${g.port} closed`;
}

// --- run -------------------------------------------------------------------------------------

const steps: [string, () => Promise<string>][] = [
  ['pack', pack],
  ['contents', contents],
  ['install', install],
  ['user install', userInstall],
  ['--version', version],
  ['serve', serve],
  ['SIGTERM', stop],
];
let failedAt: string | undefined;
for (const [name, step] of steps) {
  if (failedAt) {
    console.log(`skip ${name}`);
    continue;
  }
  try {
    console.log(`ok   ${name}: ${await step()}`);
  } catch (err) {
    failedAt = name;
    console.log(`FAIL ${name}`);
    const text = err instanceof Failed ? err.message : String((err as Error)?.stack ?? err);
    console.log(`       ${text.replace(/\n/g, '\n       ')}`);
  }
}
void upstream?.close();
console.log(
  failedAt
    ? `check:package: FAILED at ${failedAt} (${steps.findIndex(([n]) => n === failedAt) + 1} of ${steps.length}) in ${seconds(Date.now() - started)}`
    : `check:package: all ${steps.length} checks pass in ${seconds(Date.now() - started)}`,
);
process.exit(failedAt ? 1 : 0);
