import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { ROOT, alive, jsonLines, listening, portOpen, runProcess, type Exit, type Proc } from '../helpers/process.js';

/*
 * The README's run command is `npm start`: npm runs the build, then a shell that runs node.
 * Supervisors (systemd, compose, a terminal's Ctrl-C) signal npm; the gateway must get that
 * signal, drain and exit, not be left running and holding its port.
 *
 * It runs in a copy of the project (node_modules linked) so its build cannot rewrite the dist/
 * other test files are starting processes from.
 *
 * `npm start` builds only where it can (src/ and TypeScript, a dev dependency, are there); an
 * operator's `npm ci --omit=dev` beside a dist/ runs that dist/ as it is.
 */

let dir: string | undefined;
let npm: Proc | undefined;
let upstream: FakeUpstream | undefined;
let nodePid: number | undefined;
afterEach(async () => {
  npm?.child.kill('SIGKILL');
  if (nodePid && alive(nodePid)) process.kill(nodePid, 'SIGKILL');
  await upstream?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = npm = upstream = nodePid = undefined;
});

function projectCopy(): string {
  const copy = mkdtempSync(join(tmpdir(), 'gw-npm-start-'));
  for (const entry of ['package.json', 'tsconfig.json', 'src', 'config', 'scripts/start.mjs'])
    cpSync(join(ROOT, entry), join(copy, entry), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'), 'dir');
  return copy;
}

it('SIGTERM to `npm start` reaches the gateway: it drains, exits and frees its port', async () => {
  upstream = await startFakeUpstream();
  dir = projectCopy();
  npm = runProcess(
    'npm',
    ['start', '--silent'],
    { PORT: '0', UPSTREAM_URL: upstream.baseUrl, HOME: process.env.HOME ?? dir },
    { cwd: dir },
  );
  const origin = await listening(npm, 60_000);
  await expect.poll(() => jsonLines(npm!).find((l) => l.msg === 'gateway ready'), { timeout: 10_000 }).toBeTruthy();
  nodePid = jsonLines(npm).find((l) => l.msg === 'gateway ready').pid as number;
  expect(nodePid).not.toBe(npm.child.pid);
  expect((await fetch(`${origin}/healthz`)).status).toBe(200);

  npm.child.kill('SIGTERM');
  const exit = await npm.exitWithin(15_000);
  expect(exit, 'npm still running 15 s after SIGTERM').not.toBe('still running');
  expect(npm.output()).toMatch(/"signal":"SIGTERM".*shutting down/);
  expect(alive(nodePid)).toBe(false);
  expect(await portOpen(Number(new URL(origin).port))).toBe(false);
  expect((exit as Exit).code).toBe(0);
}, 90_000);

it("is quiet (npm's two-line banner, then the gateway), and rebuilds only when a source changed", async () => {
  upstream = await startFakeUpstream();
  dir = projectCopy();
  const main = join(dir, 'dist', 'main.js');
  const start = async () => {
    npm = runProcess(
      'npm',
      ['start'],
      { PORT: '0', UPSTREAM_URL: upstream!.baseUrl, HOME: process.env.HOME ?? dir!, npm_config_update_notifier: 'false' },
      { cwd: dir },
    );
    await listening(npm, 60_000);
    npm.child.kill('SIGTERM');
    expect(await npm.exitWithin(15_000)).toMatchObject({ code: 0 });
    return npm.output();
  };
  await start();
  const builtAt = statSync(main).mtimeMs;
  const again = await start();
  expect(statSync(main).mtimeMs, 'dist/ was rebuilt with no source changed').toBe(builtAt);
  expect(again.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('{'))).toEqual([
    `> compaction-gateway@${JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version} start`,
    '> exec node scripts/start.mjs',
  ]);
  const later = new Date(Date.now() + 60_000);
  utimesSync(join(dir, 'src', 'server.ts'), later, later);
  await start();
  expect(statSync(main).mtimeMs).toBeGreaterThan(builtAt);
}, 120_000);

/** npm's own cache, which the project's `npm ci` filled: the production install below is offline. */
const npmEnv = () => ({
  HOME: process.env.HOME ?? tmpdir(),
  ...(process.env.npm_config_cache ? { npm_config_cache: process.env.npm_config_cache } : {}),
});

describe('with production dependencies only (`npm ci --omit=dev`), beside a built dist/', () => {
  let prod: string;
  beforeAll(async () => {
    prod = mkdtempSync(join(tmpdir(), 'gw-npm-start-prod-'));
    // As an operator's clone has them, src/ older than the dist/ built from it.
    for (const entry of ['package.json', 'package-lock.json', 'tsconfig.json', 'src', 'config', 'dist', 'scripts/start.mjs'])
      cpSync(join(ROOT, entry), join(prod, entry), { recursive: true });
    const install = runProcess('npm', ['ci', '--omit=dev', '--offline', '--no-audit', '--no-fund'], npmEnv(), { cwd: prod });
    const exit = await install.exitWithin(120_000);
    // ENOTCACHED here: the npm cache lacks a package; `npm ci` in the project fills it.
    expect(exit, install.output()).toMatchObject({ code: 0 });
    expect(existsSync(join(prod, 'node_modules', 'typescript')), 'TypeScript was installed').toBe(false);
  }, 150_000);
  afterAll(() => {
    if (prod) rmSync(prod, { recursive: true, force: true });
  });

  it('`npm start` runs the dist/ there without building it, and SIGTERM ends it with exit 0', async () => {
    const built = readFileSync(join(prod, 'dist', 'main.js'));
    upstream = await startFakeUpstream();
    npm = runProcess('npm', ['start', '--silent'], { PORT: '0', UPSTREAM_URL: upstream.baseUrl, ...npmEnv() }, { cwd: prod });
    const origin = await listening(npm, 30_000);
    expect((await fetch(`${origin}/healthz`)).status).toBe(200);
    expect(npm.output()).not.toMatch(/tsc: not found|npm start: /);
    expect(readFileSync(join(prod, 'dist', 'main.js')).equals(built)).toBe(true);
    npm.child.kill('SIGTERM');
    expect(await npm.exitWithin(15_000)).toMatchObject({ code: 0 });
  }, 60_000);

  it('says so when src/ changed after the dist/ it cannot rebuild, and runs the older dist/', async () => {
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(prod, 'src', 'main.ts'), later, later);
    upstream = await startFakeUpstream();
    npm = runProcess('npm', ['start', '--silent'], { PORT: '0', UPSTREAM_URL: upstream.baseUrl, ...npmEnv() }, { cwd: prod });
    const origin = await listening(npm, 30_000);
    expect(npm.output()).toContain('npm start: warning: src/ is newer than dist/ and TypeScript is not installed, so the older dist/ runs');
    expect((await fetch(`${origin}/healthz`)).status).toBe(200);
    npm.child.kill('SIGTERM');
    expect(await npm.exitWithin(15_000)).toMatchObject({ code: 0 });
  }, 60_000);

  it('without a dist/, `npm start` refuses at once and says what to run', async () => {
    rmSync(join(prod, 'dist'), { recursive: true, force: true });
    npm = runProcess('npm', ['start', '--silent'], { PORT: '0', UPSTREAM_URL: 'http://127.0.0.1:9/v1', ...npmEnv() }, { cwd: prod });
    const exit = await npm.exitWithin(15_000);
    expect(exit, npm.output()).not.toBe('still running');
    expect((exit as Exit).code).not.toBe(0);
    expect(npm.output()).toContain(
      'npm start: no dist/ to run, and TypeScript (a dev dependency) is not installed to build it: run npm ci, then npm start',
    );
    expect(npm.output()).not.toMatch(/tsc: not found|Cannot find module/);
  }, 30_000);
});
