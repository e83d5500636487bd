import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, streamEvents, type FakeUpstream } from '../helpers/fake-upstream.js';

// These run the built gateway (dist/, made by `npm test`'s pretest build) as a real process.
const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

interface Proc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function run(args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [MAIN, ...args], { env: { PATH: process.env.PATH ?? '', ...env } });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function listening(proc: Proc): Promise<string> {
  await expect.poll(() => /"address":"(http:[^"]+)"|Server listening at (http:\S+)/.test(proc.output()), { timeout: 10_000 }).toBe(true);
  const m = /Server listening at (http:\/\/[^\s"]+)/.exec(proc.output()) ?? /"address":"(http:[^"]+)"/.exec(proc.output());
  return m![1];
}

let upstream: FakeUpstream | undefined;
let proc: Proc | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  await upstream?.close();
  proc = upstream = undefined;
});

describe('the gateway process', () => {
  it('exits non-zero naming each bad config key', async () => {
    proc = run([], { PORT: 'x', UPSTREAM_URL: 'not a url', LOG_LEVEL: 'loud' });
    expect(await proc.exited).toBe(2);
    expect(proc.output()).toMatch(/server\.port \(from PORT\)/);
    expect(proc.output()).toMatch(/upstream\.url \(from UPSTREAM_URL\)/);
    expect(proc.output()).toMatch(/log\.level \(from LOG_LEVEL\)/);
  });

  it('on SIGTERM finishes the running stream, then exits 0', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const events = streamEvents(['one', 'two', 'three']);
    upstream = await startFakeUpstream(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(events[0]);
      res.write(events[1]);
      await released;
      for (const e of events.slice(2)) res.write(e);
      res.end();
    });
    proc = run([], { PORT: '0', UPSTREAM_URL: upstream.baseUrl });
    const origin = await listening(proc);
    const res = await fetch(`${origin}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const reader = res.body!.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);
    proc.child.kill('SIGTERM');
    await expect.poll(() => proc!.output()).toMatch(/shutting down/);
    release();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toContain('"three"');
    expect(text).toContain('[DONE]');
    expect(await proc.exited).toBe(0);
    // The stream's access line, written as it ended, reached stdout before the exit.
    const lines = proc
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l));
    expect(lines.filter((l) => l.msg === 'request completed' && l.path === '/v1/chat/completions' && l.status === 200)).toHaveLength(1);
  });
});
