import { afterEach, describe, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { jsonLines, listening, runGateway, type Proc } from '../helpers/process.js';

/*
 * The real process's stdout: log lines are gathered into batches before they are written
 * (src/telemetry/log-destination.ts). Whatever a batch holds must still come out: within a moment when traffic is
 * light, and before the process exits on SIGTERM, in the order the lines were logged.
 */

let upstream: FakeUpstream | undefined;
let proc: Proc | undefined;

afterEach(async () => {
  proc?.child.kill('SIGKILL');
  await proc?.exited;
  await upstream?.close();
  proc = undefined;
  upstream = undefined;
});

async function start(): Promise<string> {
  upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('ok')));
  proc = runGateway([], { PORT: '0', UPSTREAM_URL: upstream.baseUrl, LOG_LEVEL: 'info' });
  return listening(proc);
}

const chat = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });

function post(origin: string, id: string): Promise<number> {
  return fetch(`${origin}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': id },
    body: chat,
  }).then(async (r) => {
    await r.text();
    return r.status;
  });
}

const accessIds = () =>
  jsonLines(proc!)
    .filter((l) => l.msg === 'request completed')
    .map((l) => l.requestId);

describe('log lines on stdout', () => {
  it('a single request on a quiet gateway: its access line comes out within a second, without a shutdown', async () => {
    const origin = await start();
    expect(await post(origin, 'quiet-1')).toBe(200);
    await expect.poll(accessIds, { timeout: 1_000, interval: 20 }).toEqual(['quiet-1']);
  });

  it('lines still gathered when SIGTERM comes are written before the exit, every one, in order', async () => {
    const origin = await start();
    const ids = Array.from({ length: 60 }, (_, i) => `burst-${i}`);
    // One after another, so the lines are logged in this order; about 20 KB of lines: several
    // whole batches and a part of one.
    for (const id of ids) expect(await post(origin, id)).toBe(200);
    proc!.child.kill('SIGTERM');
    const exit = await proc!.exitWithin(5_000);
    expect(exit).not.toBe('still running');
    expect(accessIds()).toEqual(ids);
    const lines = jsonLines(proc!);
    expect(lines.at(-1)!.msg).toMatch(/stopped|shut|exit/i);
  });
});

describe('an exit that skips the shutdown', () => {
  it('still writes the lines gathered but not yet handed over', async () => {
    const { runProcess, ROOT } = await import('../helpers/process.js');
    const script = `import('./dist/telemetry/log-destination.js').then((m) => { const out = m.stdoutDestination('json'); out.write('{"msg":"first"}\\n'); out.write('{"msg":"last before exit"}\\n'); process.exit(3); });`;
    const child = runProcess(process.execPath, ['-e', script], {}, { cwd: ROOT });
    const exit = await child.exitWithin(10_000);
    expect(exit).not.toBe('still running');
    expect((exit as { code: number }).code).toBe(3);
    expect(child.output()).toBe('{"msg":"first"}\n{"msg":"last before exit"}\n');
  });
});
