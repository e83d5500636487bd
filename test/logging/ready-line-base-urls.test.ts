import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { jsonLines, listening, runGateway, type Proc } from '../helpers/process.js';

/*
 * The ready line gives the base URL to copy into each kind of agent, from the address the
 * gateway actually listens on: OpenAI's SDKs and Codex take it with /v1, Anthropic's and Gemini's
 * without (they add their own version path); each named upstream its own under /NAME. Each URL
 * it gives is then used as an agent would, and reaches the upstream it should.
 */

let proc: Proc | undefined;
let upstreams: FakeUpstream[] = [];
let dir: string | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  for (const u of upstreams) await u.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  proc = dir = undefined;
  upstreams = [];
});

const ready = (p: Proc) => jsonLines(p).find((l) => l.msg === 'gateway ready');
const portOf = (origin: string) => new URL(origin).port;

const chat = (baseUrl: string) =>
  fetch(`${baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });
const messages = (baseUrl: string) =>
  fetch(`${baseUrl}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'claude', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
  });

async function start(args: string[], env: Record<string, string>) {
  proc = runGateway(args, { PORT: '0', ...env });
  const origin = await listening(proc);
  await expect.poll(() => ready(proc!), { timeout: 10_000 }).toBeTruthy();
  return { origin, line: ready(proc) };
}

describe('the ready line’s base URLs', () => {
  it('one upstream: the URL each kind of agent uses, on the port it listens on, and each works', async () => {
    const upstream = await startFakeUpstream();
    upstreams.push(upstream);
    const { origin, line } = await start([], { HOST: '127.0.0.1', UPSTREAM_URL: upstream.baseUrl });
    const at = `http://127.0.0.1:${portOf(origin)}`;
    expect(line.baseUrls).toEqual({ openai: `${at}/v1`, anthropic: at, gemini: at });
    expect(line.upstreams[0].baseUrls).toEqual({ openai: `${at}/default/v1`, anthropic: `${at}/default`, gemini: `${at}/default` });

    expect((await chat(line.baseUrls.openai)).status).toBe(200);
    expect((await messages(line.baseUrls.anthropic)).status).toBe(200);
    expect((await chat(line.upstreams[0].baseUrls.openai)).status).toBe(200);
    expect(upstream.received.map((r) => r.url)).toEqual(['/v1/chat/completions', '/v1/messages', '/v1/chat/completions']);
  });

  it('listening on 0.0.0.0: shown as 127.0.0.1, which reaches it', async () => {
    const upstream = await startFakeUpstream();
    upstreams.push(upstream);
    const { origin, line } = await start([], { HOST: '0.0.0.0', UPSTREAM_URL: upstream.baseUrl });
    expect(line.baseUrls.openai).toBe(`http://127.0.0.1:${portOf(origin)}/v1`);
    expect((await chat(line.baseUrls.openai)).status).toBe(200);
  });

  it('named upstreams: each its own prefixed URLs for the APIs it serves; unprefixed, what the default and routes serve', async () => {
    const openai = await startFakeUpstream();
    const anthropic = await startFakeUpstream();
    upstreams.push(openai, anthropic);
    dir = mkdtempSync(join(tmpdir(), 'ready-line-'));
    const config = join(dir, 'gateway.json');
    writeFileSync(
      config,
      JSON.stringify({
        server: { host: '127.0.0.1' },
        upstreams: {
          openai: { url: openai.baseUrl, apis: ['chat', 'responses'] },
          anthropic: { url: anthropic.baseUrl, apis: ['messages'] },
        },
        defaultUpstream: 'openai',
        routes: [{ api: 'messages', upstream: 'anthropic' }],
      }),
    );
    const { origin, line } = await start(['--config', config], {});
    const at = `http://127.0.0.1:${portOf(origin)}`;
    // Gemini goes nowhere here: no URL for it.
    expect(line.baseUrls).toEqual({ openai: `${at}/v1`, anthropic: at });
    expect(line.upstreams.map((u: any) => [u.name, u.baseUrls])).toEqual([
      ['openai', { openai: `${at}/openai/v1` }],
      ['anthropic', { anthropic: `${at}/anthropic` }],
    ]);

    expect((await chat(line.upstreams[0].baseUrls.openai)).status).toBe(200);
    expect((await messages(line.upstreams[1].baseUrls.anthropic)).status).toBe(200);
    expect((await messages(line.baseUrls.anthropic)).status).toBe(200);
    expect(openai.received.map((r) => r.url)).toEqual(['/v1/chat/completions']);
    expect(anthropic.received.map((r) => r.url)).toEqual(['/v1/messages', '/v1/messages']);
  });
});
