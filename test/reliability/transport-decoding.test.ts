import { gzipSync } from 'node:zlib';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest, isSummarizer, parseCompactionHeader } from '../helpers/rescue.js';
import { Client, expectAnthropicError, expectOpenAIError, sleep } from './helpers.js';

/*
 * Decompression bombs both ways. An upstream's error body is read up to
 * upstream.errorBodyLimitBytes (1 MiB) to classify it, and that bound holds for the decoded text
 * too: a 2 MB gzip body that inflates to 2 GiB costs the gateway about a megabyte, the classifier
 * reads its first megabyte (where an error says what it is), and the client gets the upstream's own
 * bytes. A request body's decoded size has server.bodyLimitBytes for a limit: past it, a 413.
 */

const MiB = 1024 * 1024;
const OVERLONG_HEAD =
  '{"error":{"message":"This model\'s maximum context length is 128000 tokens. However, your messages resulted in 190000 tokens.",' +
  '"type":"invalid_request_error","code":"context_length_exceeded","param":"messages","padding":"';

/**
 * gzip members, one after another, are one gzip body: `head`, then `members` copies of 8 MiB of
 * spaces (8 KB each), then `tail`. 256 members: a 2 MB body that inflates to 2 GiB.
 */
function bomb(head: string, members: number, tail: string): Buffer {
  const spaces = gzipSync(Buffer.alloc(8 * MiB, 0x20), { level: 9 });
  return Buffer.concat([gzipSync(head), ...Array.from({ length: members }, () => spaces), gzipSync(tail)]);
}

/** The process's peak resident set so far, in bytes (the kernel's high-water mark). */
const peakRss = () => process.resourceUsage().maxRSS * 1024;

/** Samples RSS every 10 ms while `work` runs; returns its result and the highest sample. */
async function sampled<T>(work: () => Promise<T>): Promise<{ result: T; highest: number }> {
  let highest = process.memoryUsage().rss;
  const timer = setInterval(() => (highest = Math.max(highest, process.memoryUsage().rss)), 10);
  try {
    const result = await work();
    return { result, highest };
  } finally {
    clearInterval(timer);
  }
}

describe('a gzip bomb as an upstream error body', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  const client = new Client();
  const overlongBomb = bomb(OVERLONG_HEAD, 256, '"}}');
  const overloadedBomb = bomb('{"error":{"message":"The server is overloaded.","type":"server_error","padding":"', 256, '"}}');

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
  });
  afterAll(async () => {
    await client.close();
    await gateway.close();
    await upstream.close();
  });

  // First: RSS's high-water mark only rises, so the cleanest measure is the first bomb in the process.
  it('is relayed byte for byte when it is not overlong, and the gateway stays small', async () => {
    upstream.handle((_req, res) => {
      res.writeHead(503, {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'content-length': overloadedBomb.length,
        'x-from': 'upstream',
      });
      res.end(overloadedBomb);
    });
    const before = { peak: peakRss(), rss: process.memoryUsage().rss };
    const started = performance.now();
    const { result: res, highest } = await sampled(async () => {
      // undici's request does not decode: these are the bytes on the wire.
      const answer = await request(`${gateway.baseUrl}/chat/completions`, {
        method: 'POST',
        dispatcher: client.agent,
        headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip' },
        body: JSON.stringify({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] }),
        signal: AbortSignal.timeout(15_000),
      });
      return { status: answer.statusCode, headers: answer.headers, bytes: Buffer.from(await answer.body.arrayBuffer()) };
    });
    const elapsedMs = performance.now() - started;
    const peakGrowth = peakRss() - before.peak;
    console.log(
      `503 gzip bomb (2 MB -> 2 GiB): relayed in ${elapsedMs.toFixed(0)} ms; RSS ${mb(before.rss)} -> highest sample ${mb(highest)}; peak RSS grew ${mb(peakGrowth)}`,
    );

    expect(res.status).toBe(503);
    expect(res.headers['x-from']).toBe('upstream');
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(res.bytes.equals(overloadedBomb)).toBe(true);
    expect(peakGrowth).toBeLessThan(256 * MiB);
  });

  it('is classified from its first bytes: an overlong error is still rescued, and the gateway stays small', async () => {
    expect(overlongBomb.length).toBeGreaterThan(2_000_000);
    upstream.handle((req, res) => {
      if (isSummarizer(req)) return json(res, 200, completion('summary of the earlier turns'));
      if (req.headers['x-gateway-compaction']) return json(res, 200, completion('rescued'));
      res.writeHead(400, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': overlongBomb.length });
      res.end(overlongBomb);
    });
    const before = { peak: peakRss(), rss: process.memoryUsage().rss };
    const started = performance.now();
    const { result: res, highest } = await sampled(() =>
      client.post(`${gateway.baseUrl}/chat/completions`, agentRequest(60), { 'accept-encoding': 'gzip' }, AbortSignal.timeout(15_000)),
    );
    const elapsedMs = performance.now() - started;
    const peakGrowth = peakRss() - before.peak;
    console.log(
      `overlong gzip bomb (2 MB -> 2 GiB): answered in ${elapsedMs.toFixed(0)} ms; RSS ${mb(before.rss)} -> highest sample ${mb(highest)}; peak RSS grew ${mb(peakGrowth)}`,
    );

    expect(res.status).toBe(200);
    expect(res.json.choices[0].message.content).toBe('rescued');
    expect(parseCompactionHeader(res.headers['x-gateway-compaction'] as string).outcome).toBe('replayed');
    // Unbounded, the held megabyte inflated to a gigabyte here. Generous: a loaded machine, a GC late.
    expect(peakGrowth).toBeLessThan(256 * MiB);
  });

  it('leaves the gateway serving others meanwhile', async () => {
    upstream.handle((req, res) => {
      if (req.json?.messages?.[0]?.content === 'bomb') {
        res.writeHead(503, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': overloadedBomb.length });
        res.end(overloadedBomb);
        return;
      }
      json(res, 200, completion('ok'));
    });
    const bombs = Array.from({ length: 3 }, () =>
      client.post(
        `${gateway.baseUrl}/chat/completions`,
        { model: 'gpt-x', messages: [{ role: 'user', content: 'bomb' }] },
        {},
        AbortSignal.timeout(15_000),
      ),
    );
    await sleep(20);
    const healthz = await request(`${gateway.origin}/healthz`, { dispatcher: client.agent, signal: AbortSignal.timeout(15_000) });
    expect(healthz.statusCode).toBe(200);
    await healthz.body.dump();
    const plain = await client.post(
      `${gateway.baseUrl}/chat/completions`,
      { model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] },
      {},
      AbortSignal.timeout(15_000),
    );
    expect(plain.status).toBe(200);
    for (const res of await Promise.all(bombs)) expect(res.status).toBe(503);
  });
});

describe('a gzip bomb as a request body', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  const client = new Client();
  const LIMIT = 4 * MiB;

  beforeAll(async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('forwarded')));
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, server: { bodyLimitBytes: LIMIT } });
  });
  afterEach(() => {
    upstream.received.length = 0;
  });
  afterAll(async () => {
    await client.close();
    await gateway.close();
    await upstream.close();
  });

  const request = JSON.stringify({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] });
  // 64 KB on the wire, 64 MiB decoded: under the limit as sent, sixteen times over it decoded.
  const requestBomb = bomb('{"model":"gpt-x","messages":[{"role":"user","content":"', 8, '"}]}');

  it.each(['/chat/completions', '/responses', '/messages'])(
    "on %s: 413 in the gateway's error shape, nothing sent upstream",
    async (path) => {
      expect(requestBomb.length).toBeLessThan(LIMIT);
      const res = await client.post(`${gateway.baseUrl}${path}`, requestBomb, { 'content-encoding': 'gzip' }, AbortSignal.timeout(15_000));
      expect(res.status).toBe(413);
      // In the shape of the caller's API: Anthropic's on /messages.
      if (path === '/messages') expectAnthropicError(res.json, 'request_too_large', 'request_too_large');
      else expectOpenAIError(res.json, 'request_too_large');
      expect(upstream.received).toHaveLength(0);
    },
  );

  it('a compressed body within the limit goes upstream as sent, and its model is read for the log', async () => {
    const sent = gzipSync(request);
    const res = await client.post(`${gateway.baseUrl}/chat/completions`, sent, { 'content-encoding': 'gzip' }, AbortSignal.timeout(15_000));
    expect(res.status).toBe(200);
    expect(upstream.received).toHaveLength(1);
    expect(upstream.received[0].body.equals(sent)).toBe(true);
    expect(upstream.received[0].headers['content-encoding']).toBe('gzip');
    await expect
      .poll(
        () =>
          gateway
            .logLines()
            .filter((l) => l.msg === 'request completed')
            .at(-1)?.model,
      )
      .toBe('gpt-x');
  });
});

function mb(bytes: number): string {
  return `${(bytes / MiB).toFixed(0)} MB`;
}
