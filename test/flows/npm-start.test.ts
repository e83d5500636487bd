import { cpSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { ROOT, alive, jsonLines, listening, portOpen, runProcess, type Exit, type Proc } from '../helpers/process.js';

/*
 * The README's run command is `npm start`: npm runs the build, then a shell that runs node.
 * Supervisors (systemd, compose, a terminal's Ctrl-C) signal npm; the gateway must get that
 * signal, drain and exit, not be left running and holding its port.
 *
 * It runs in a copy of the project (node_modules linked) so its build cannot rewrite the dist/
 * other test files are starting processes from.
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
  for (const entry of ['package.json', 'tsconfig.json', 'src', 'config']) cpSync(join(ROOT, entry), join(copy, entry), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'), 'dir');
  return copy;
}

it('SIGTERM to `npm start` reaches the gateway: it drains, exits and frees its port', async () => {
  upstream = await startFakeUpstream();
  dir = projectCopy();
  npm = runProcess('npm', ['start', '--silent'], { PORT: '0', UPSTREAM_URL: upstream.baseUrl, HOME: process.env.HOME ?? dir }, { cwd: dir });
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
