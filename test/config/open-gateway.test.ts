import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { isLoopback } from '../../src/process/startup.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { freePort } from '../helpers/ports.js';
import { jsonLines, listening, portOpen, runGateway, type Proc } from '../helpers/process.js';

// Safe by default: the built process holding the provider key, asking clients for no key, on an
// address beyond loopback (what the image does with HOST=0.0.0.0) refuses to start, unless the
// operator opts in to an open gateway. The tests that must listen beyond loopback send their
// traffic to 127.0.0.1 only.

const UPSTREAM_KEY = 'sk-upstream-never-shown';

let proc: Proc | undefined;
let upstream: FakeUpstream | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  await upstream?.close();
  proc = upstream = undefined;
});

const warnings = (p: Proc) =>
  jsonLines(p)
    .filter((l) => l.level === 40)
    .map((l) => l.msg as string);

async function chat(origin: string): Promise<string | null> {
  const sdk = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'any-placeholder', maxRetries: 0, timeout: 10_000 });
  const answer = await sdk.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
  return answer.choices[0].message.content;
}

describe('an open gateway', () => {
  it('is refused: exit 2, what to set on stderr, never listening, no key shown', async () => {
    upstream = await startFakeUpstream();
    const port = await freePort();
    proc = runGateway([], { HOST: '0.0.0.0', PORT: String(port), UPSTREAM_URL: upstream.baseUrl, UPSTREAM_API_KEY: UPSTREAM_KEY });
    expect(await proc.exitWithin(10_000)).toMatchObject({ code: 2 });
    const out = proc.output();
    expect(out).toMatch(/refusing to start an open gateway/);
    expect(out).toMatch(/listens on 0\.0\.0\.0/);
    expect(out).toMatch(/GATEWAY_API_KEYS/);
    expect(out).toMatch(/GATEWAY_ALLOW_OPEN=1 \(auth\.allowOpen: true\)/);
    expect(out).toMatch(/HOST=127\.0\.0\.1/);
    expect(out).not.toMatch(/Server listening/);
    expect(out).not.toContain(UPSTREAM_KEY);
    expect(await portOpen(port)).toBe(false);
    expect(upstream.received).toHaveLength(0);
  });

  it('is refused when the gateway keys went to GATEWAY_API_KEY, and the message names GATEWAY_API_KEYS', async () => {
    proc = runGateway([], {
      HOST: '0.0.0.0',
      PORT: String(await freePort()),
      UPSTREAM_API_KEY: UPSTREAM_KEY,
      GATEWAY_API_KEY: 'gw-meant-as-auth',
    });
    expect(await proc.exitWithin(10_000)).toMatchObject({ code: 2 });
    const out = proc.output();
    expect(out).toMatch(/refusing to start an open gateway/);
    expect(out).toMatch(/GATEWAY_API_KEY is set, but the gateway reads no such variable .*did you mean GATEWAY_API_KEYS \(auth\.keys\)\?/);
    expect(out).not.toMatch(/gw-meant-as-auth|sk-upstream-never-shown/);
  });

  it('is refused from a config file too (server.host and upstream.apiKey in the file)', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'gw-open-')), 'gw.yaml');
    writeFileSync(file, `server:\n  host: "::"\n  port: ${await freePort()}\nupstream:\n  apiKey: ${UPSTREAM_KEY}\n`);
    proc = runGateway(['--config', file], {});
    expect(await proc.exitWithin(10_000)).toMatchObject({ code: 2 });
    expect(proc.output()).toMatch(/refusing to start an open gateway: .*listens on :: \(server\.host, HOST\)/);
  });

  it('starts with GATEWAY_ALLOW_OPEN=1, says so in a WARN line, and serves with the provider key', async () => {
    upstream = await startFakeUpstream();
    proc = runGateway([], {
      HOST: '0.0.0.0',
      PORT: '0',
      UPSTREAM_URL: upstream.baseUrl,
      UPSTREAM_API_KEY: UPSTREAM_KEY,
      GATEWAY_ALLOW_OPEN: '1',
    });
    const origin = await listening(proc);
    expect(origin).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await expect.poll(() => warnings(proc!).length, { timeout: 10_000 }).toBe(1);
    expect(warnings(proc)[0]).toMatch(
      /^open gateway: anyone who reaches its port on 0\.0\.0\.0 is served with the provider key .*auth\.allowOpen \(GATEWAY_ALLOW_OPEN\)/,
    );
    expect(await chat(origin)).toBe('ok');
    expect(upstream.received.at(-1)!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(proc.output()).not.toContain(UPSTREAM_KEY);
  });

  it('on loopback, the provider key without gateway keys starts with no warning (a sidecar or a laptop)', async () => {
    upstream = await startFakeUpstream();
    proc = runGateway([], { HOST: '127.0.0.1', PORT: '0', UPSTREAM_URL: upstream.baseUrl, UPSTREAM_API_KEY: UPSTREAM_KEY });
    const origin = await listening(proc);
    await expect.poll(() => jsonLines(proc!).some((l) => l.msg === 'gateway ready'), { timeout: 10_000 }).toBe(true);
    expect(await chat(origin)).toBe('ok');
    expect(upstream.received.at(-1)!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(warnings(proc)).toEqual([]);
  });
});

describe('what counts as loopback', () => {
  it.each(['127.0.0.1', '127.3.2.1', '::1', '[::1]', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1', 'localhost', 'LOCALHOST'])(
    '%s is loopback',
    (host) => {
      expect(isLoopback(host)).toBe(true);
    },
  );

  it.each(['0.0.0.0', '::', '10.0.0.5', '192.168.1.20', '::ffff:10.0.0.1', '128.0.0.1', 'gateway.internal', 'localhost.example.com'])(
    '%s is not',
    (host) => {
      expect(isLoopback(host)).toBe(false);
    },
  );
});
