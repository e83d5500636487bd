import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream, type Handler } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest, expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';
import { Client, expectNothingLeftOpen, LIMIT_BYTES, provider, settledResources, writeUntilBlocked } from './helpers.js';

/*
 * The summarizer failing in ways test/flows/rescue-summarizer-fails.test.ts does not cover
 * (there: down, hanging, 503, `{"choices":[]}`). Each time the fallback must compact, the replay
 * must be valid and smaller, and nothing may be left open.
 */

let upstream: FakeUpstream | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
  gateway = upstream = undefined;
});

const raw =
  (text: string, status = 200): Handler =>
  (_req, res) =>
    json(res, status, text);
/** Every test here is about the summarizer: masking off, so the compaction always asks it. */
const NO_MASK = { mask: false };

const failures: Array<[name: string, summarizer: Handler, kind: string]> = [
  ['an empty 200 body', raw(''), 'bad_response'],
  [
    'an HTML 200 page',
    (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html><body>Welcome to nginx!</body></html>');
    },
    'bad_response',
  ],
  ['truncated JSON', raw('{"choices":[{"message":{"content":"half'), 'bad_response'],
  ['content that is not a string', raw('{"choices":[{"message":{"content":12345}}]}'), 'bad_response'],
  ['content that is only whitespace', raw('{"choices":[{"message":{"content":"  \\n\\t "}}]}'), 'bad_response'],
  ['a JSON null', raw('null'), 'bad_response'],
  ['a refusal (401)', raw('{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}', 401), 'rejected'],
  [
    'its own overlong error',
    raw('{"error":{"message":"maximum context length exceeded","code":"context_length_exceeded"}}', 400),
    'overlong',
  ],
  ['a reset before the headers', (_req, res) => void res.socket!.resetAndDestroy(), 'unreachable'],
  ['a malformed HTTP response', (_req, res) => void res.socket!.end('HTTP/1.1 OK\r\n\r\n'), 'unreachable'],
  [
    'headers, then a stalled body past its timeout',
    (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"choices":[');
    },
    'timeout',
  ],
];

async function rescueOnce(client: Client) {
  return client.post(`${gateway!.baseUrl}/chat/completions`, agentRequest(60));
}

describe('the summarizer fails; the fallback compacts and the replay happens', () => {
  it.each(failures)('%s', async (_name, summarizer, kind) => {
    const side = provider({ summarizer });
    upstream = await startFakeUpstream(side.handler);
    gateway = await startGateway({
      upstream: { url: upstream.baseUrl },
      summarizer: { maxInputTokens: 500_000, timeoutMs: 2_000 },
      compaction: NO_MASK,
    });
    const baseline = await settledResources();
    const client = new Client();

    const res = await rescueOnce(client);
    expect(res.status).toBe(200);
    expect(res.json.choices[0].message.content).toBe('rescued answer');
    expect(parseCompactionHeader(res.headers['x-gateway-compaction'] as string)).toMatchObject({
      outcome: 'replayed',
      strategy: 'fallback',
      'summarizer-failure': kind,
    });
    const chats = upstream.received.filter((r) => r.headers['x-gateway-compaction'] !== 'summarizer');
    expect(chats).toHaveLength(2);
    expectValidReplay(chats[0], chats[1]);

    const next = await client.post(`${gateway.baseUrl}/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(next.status).toBe(200);
    await expectNothingLeftOpen(baseline, side.unfinished, client);
    expect(gateway.logLines().filter((l) => l.level >= 50)).toEqual([]);
  });
});

describe('a summary longer than what it replaces', () => {
  it.each([
    ['2 MB of summary text', 2_000_000],
    ['a summary as long as the whole request', 300_000],
  ])('%s: clamped; the replay is valid, smaller and under the limit', async (_name, size) => {
    const side = provider({
      summarizer: (_req, res) => json(res, 200, completion(`SUMMARY ${'very detailed '.repeat(Math.ceil(size / 14))}`)),
    });
    upstream = await startFakeUpstream(side.handler);
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, summarizer: { maxInputTokens: 500_000 }, compaction: NO_MASK });
    const client = new Client();
    const res = await rescueOnce(client);
    expect(res.status).toBe(200);
    const chats = upstream.received.filter((r) => r.headers['x-gateway-compaction'] !== 'summarizer');
    expect(chats).toHaveLength(2);
    expectValidReplay(chats[0], chats[1]);
    expect(chats[1].body.length).toBeLessThanOrEqual(LIMIT_BYTES);
    await client.close();
  });

  it('when the middle is small, a long summary never makes the replay bigger than the original', async () => {
    // Short history, one huge recent tool output: there is little to summarise.
    const body = agentRequest(8, {}, 200);
    body.messages.at(-1)!.content = `log:\n${'line of output\n'.repeat(6_000)}`;
    // Long, but under the bound on a summarizer's answer: the summary itself is clamped.
    const side = provider({ summarizer: (_req, res) => json(res, 200, completion('S'.repeat(60_000))) });
    upstream = await startFakeUpstream(side.handler);
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, summarizer: { maxInputTokens: 500_000 }, compaction: NO_MASK });
    const client = new Client();
    const res = await client.post(`${gateway.baseUrl}/chat/completions`, body);
    expect(res.status).toBe(200);
    const chats = upstream.received.filter((r) => r.headers['x-gateway-compaction'] !== 'summarizer');
    expect(chats).toHaveLength(2);
    expectValidReplay(chats[0], chats[1]);
    expect(chats[1].body.length).toBeLessThanOrEqual(LIMIT_BYTES);
    const middleBytes = JSON.stringify(chats[0].json.messages.slice(0, -6)).length;
    const summary = chats[1].json.messages.find((m: { content?: unknown }) => String(m.content).includes('SSSS'));
    expect(JSON.stringify(summary).length).toBeLessThan(middleBytes + 20_000);
    await client.close();
  });
});

/** Full garbage collections on demand, as a busy gateway gets them all the time. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  gc();
}

describe('the summarizer deadline and the size of its answer', () => {
  // Close the upstream first: its sockets going away is what unblocks a stuck summarizer call.
  afterEach(async () => {
    await upstream?.close();
  });

  /*
   * The deadline must hold even when nothing but the timer refers to it: on Node 20 a bare
   * `AbortSignal.any([signal, AbortSignal.timeout(ms)])` could be collected while the summarizer
   * stalls, and the client then waited for ever. Two full collections while it stalls.
   */
  it('fires even when a garbage collection runs while the summarizer stalls', async () => {
    let arrived!: () => void;
    const stalled = new Promise<void>((r) => (arrived = r));
    const side = provider({
      summarizer: (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"choices":');
        arrived();
      },
    });
    upstream = await startFakeUpstream(side.handler);
    gateway = await startGateway({
      upstream: { url: upstream.baseUrl },
      summarizer: { maxInputTokens: 500_000, timeoutMs: 300 },
      compaction: NO_MASK,
    });
    const client = new Client();
    const pending = client.post(`${gateway.baseUrl}/chat/completions`, agentRequest(60), {}, AbortSignal.timeout(1_500));
    await stalled;
    collectGarbage();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(parseCompactionHeader(res.headers['x-gateway-compaction'] as string)).toMatchObject({ 'summarizer-failure': 'timeout' });
    await client.close();
  });

  /*
   * A summary is a few KB (maxSummaryTokens); an answer without end must be read only up to a
   * bound, not until memory runs out (3 GB in 15 s measured when it was read whole).
   */
  it('an answer without end is read only up to a bound', async () => {
    let written = 0;
    const side = provider({
      summarizer: async (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"choices":[{"message":{"content":"');
        written = await writeUntilBlocked(res, 24 * 1024 * 1024);
      },
    });
    upstream = await startFakeUpstream(side.handler);
    gateway = await startGateway({
      upstream: { url: upstream.baseUrl },
      summarizer: { maxInputTokens: 500_000, timeoutMs: 500 },
      compaction: NO_MASK,
    });
    const client = new Client();
    const res = await client
      .post(`${gateway.baseUrl}/chat/completions`, agentRequest(60), {}, AbortSignal.timeout(2_000))
      .catch((e: Error) => e);
    expect(written).toBeLessThan(4 * 1024 * 1024);
    expect(res).not.toBeInstanceOf(Error);
    await client.close();
  });
});
