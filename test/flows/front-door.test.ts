import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { validateConfig } from '../../src/config/load.js';
import { buildServer } from '../../src/server.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completion, json, sse, startFakeUpstream, streamEvents, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { overlongError, rawHttp } from '../reliability/helpers.js';
import { agentRequest } from '../helpers/rescue.js';

/*
 * The rescued endpoints are served ahead of fastify's router (src/routes/front-door.ts) when the
 * path is literally theirs. The same route behind a path the router must decode first
 * (`/%76%31/…` is `/v1/…`) is served by fastify. Both ways must give a client the same bytes,
 * the upstream the same request, the access log the same line and the metrics the same counts;
 * each case below sends one request both ways and compares everything but the request id, the
 * date and the timings.
 */

const GATEWAY_KEY = 'gw-key-front-door';
const BODY_LIMIT = 64 * 1024;
const PATHS = { front: '/v1/chat/completions', router: '/%76%31/chat/completions' };

let upstream: FakeUpstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startFakeUpstream(async (req, res) => {
    if (req.json?.stream) return sse(res, streamEvents(['a', 'b']));
    if (req.json?.overlong && !req.headers['x-gateway-compaction']) return json(res, 400, JSON.parse(overlongError(req.body.length, 20_000)));
    json(res, 200, completion(`seen ${req.body.length} bytes`), { 'x-request-id': 'upstream-id-1' });
  });
  gateway = await startGateway({
    upstream: { url: upstream.baseUrl, apiKey: 'sk-upstream' },
    server: { bodyLimitBytes: BODY_LIMIT },
    auth: { keys: [GATEWAY_KEY] },
    summarizer: { url: upstream.baseUrl },
    // Each case is sent twice: the second must not find the first's compaction remembered.
    memory: { enabled: false },
  });
});
afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

interface Seen {
  status: number;
  headers: string[];
  body: string;
  upstream: Array<{ url: string; headers: Record<string, unknown>; body: string }>;
  accessLine: Record<string, unknown> | undefined;
  metrics: string;
}

const KEY = `Authorization: Bearer ${GATEWAY_KEY}\r\n`;

/** Sends one raw HTTP/1.1 request to `path` and collects what everyone saw of it. */
async function send(path: string, head: string, body = ''): Promise<Seen> {
  const upstreamBefore = upstream.received.length;
  const linesBefore = gateway.logLines().length;
  const metricsBefore = await metricText();
  const text = await rawHttp(gateway.origin, `POST ${path} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n${head}\r\n${body}`, 5_000);
  const [top, ...rest] = text.split('\r\n\r\n');
  const [statusLine, ...headerLines] = top.split('\r\n');
  const lines = gateway.logLines().slice(linesBefore);
  const access = lines.find((l) => l.msg === 'request completed');
  return withoutTimings({
    status: Number(statusLine.split(' ')[1]),
    headers: headerLines.map((h) => h.toLowerCase()).filter((h) => !/^(date|x-request-id):/.test(h)).sort(),
    body: rest.join('\r\n\r\n'),
    upstream: upstream.received.slice(upstreamBefore).map((r) => {
      const { 'x-request-id': _id, ...headers } = r.headers;
      return { url: r.url, headers, body: r.body.toString('latin1') };
    }),
    accessLine: access && { ...access, time: undefined, requestId: undefined, durationMs: undefined, upstreamTtfbMs: undefined, path: undefined },
    metrics: countsChangedSince(metricsBefore, await metricText()),
  });
}

/** The compaction header's own timing differs from run to run. */
function withoutTimings(seen: Seen): Seen {
  return JSON.parse(JSON.stringify(seen).replace(/summarizer-ms=\d+/g, 'summarizer-ms=N'));
}

async function metricText(): Promise<string> {
  const res = await fetch(`${gateway.origin}/metrics`);
  return res.text();
}

/** The counter and histogram-count lines that moved, with how much; timings' buckets left out. */
function countsChangedSince(before: string, after: string): string {
  const value = (text: string) => new Map(text.split('\n').filter((l) => /^gateway_\w+(_total|_count)\{/.test(l)).map((l) => [l.slice(0, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1))]));
  const a = value(before);
  return [...value(after)]
    .filter(([k, v]) => v !== (a.get(k) ?? 0))
    .map(([k, v]) => `${k} +${v - (a.get(k) ?? 0)}`)
    .sort()
    .join('\n');
}

const chat = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hello' }] });
const length = (body: string) => `Content-Length: ${Buffer.byteLength(body)}\r\n`;
const chunked = (body: string) => `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
const overlong = JSON.stringify({ ...agentRequest(12, {}, 1_000), overlong: true });

const cases: Array<[string, string, string, number]> = [
  ['a plain request', `${KEY}Content-Type: application/json\r\n${length(chat)}`, chat, 200],
  ['a streamed answer', `${KEY}Content-Type: application/json\r\n${length('{"stream":true}')}`, '{"stream":true}', 200],
  ['a client request id and a query', `${KEY}Content-Type: application/json\r\nX-Request-Id: client-id-7\r\n${length(chat)}`, chat, 200],
  ['a rescued request', `${KEY}Content-Type: application/json\r\n${length(overlong)}`, overlong, 200],
  ['a chunked body', `${KEY}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n`, chunked(chat), 200],
  ['a chunked body over the limit', `${KEY}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n`, chunked('x'.repeat(BODY_LIMIT + 1)), 413],
  ['a declared length over the limit', `${KEY}Content-Type: application/json\r\nContent-Length: ${BODY_LIMIT + 1}\r\n`, 'x'.repeat(BODY_LIMIT + 1), 413],
  ['a broken chunk size', `${KEY}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n`, 'ZZ\r\n{}\r\n0\r\n\r\n', 400],
  ['no gateway key', `Content-Type: application/json\r\n${length(chat)}`, chat, 401],
  ['a wrong gateway key', `Authorization: Bearer nope\r\nContent-Type: application/json\r\n${length(chat)}`, chat, 401],
  ['the key as x-api-key', `X-Api-Key: ${GATEWAY_KEY}\r\nContent-Type: application/json\r\n${length(chat)}`, chat, 200],
  ['no content type', `${KEY}${length(chat)}`, chat, 200],
  ['a content type without a subtype', `${KEY}Content-Type: json\r\n${length(chat)}`, chat, 415],
  ['an empty body', `${KEY}Content-Type: application/json\r\nContent-Length: 0\r\n`, '', 200],
];

describe('the front door and fastify answer alike', () => {
  it.each(cases)('%s', async (_name, head, body, status) => {
    const query = _name.includes('query') ? '?api-version=1' : '';
    const front = await send(`${PATHS.front}${query}`, head, body);
    const router = await send(`${PATHS.router}${query}`, head, body);
    expect(front.status).toBe(status);
    expect(front).toEqual(router);
    if (status === 200) expect(front.upstream.length).toBeGreaterThan(0);
  });

  it('each answer carries its own request id, the client\'s when it sent a sane one', async () => {
    const text = await rawHttp(gateway.origin, `POST ${PATHS.front} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n${KEY}Content-Type: application/json\r\nX-Request-Id: client-id-9\r\n${length(chat)}\r\n${chat}`, 5_000);
    expect(text).toMatch(/\r\nx-request-id: client-id-9\r\n/i);
    expect(upstream.received.at(-1)!.headers['x-request-id']).toBe('client-id-9');
    const line = gateway.logLines().findLast((l) => l.msg === 'request completed');
    expect(line).toMatchObject({ requestId: 'client-id-9', path: PATHS.front, status: 200, model: 'gpt-test' });
  });
});

describe('while the gateway closes', () => {
  it.each([PATHS.front, PATHS.router])('a request to %s that arrives after close began is not served', async (path) => {
    const slow = await startFakeUpstream(async (_req, res) => {
      await new Promise((r) => setTimeout(r, 400));
      json(res, 200, completion('slow'));
    });
    const closing = await startGateway({ upstream: { url: slow.baseUrl } });
    try {
      const one = (close: boolean) =>
        `POST ${path} HTTP/1.1\r\nHost: gw\r\n${close ? 'Connection: close\r\n' : ''}Content-Type: application/json\r\n${length(chat)}\r\n${chat}`;
      const socket = connect(Number(new URL(closing.origin).port), '127.0.0.1');
      let text = '';
      socket.setEncoding('latin1').on('data', (d) => (text += d));
      const ended = new Promise((r) => socket.on('close', r));
      socket.write(one(false));
      await new Promise((r) => setTimeout(r, 100));
      const closed = closing.app.close();
      await new Promise((r) => setTimeout(r, 100));
      // The first request is still upstream; the second comes in on its connection after close began.
      socket.write(one(true));
      await ended;
      await closed;
      const statuses = [...text.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => Number(m[1]));
      // Node ends a connection that was busy when close began once its answer is out.
      expect(statuses).toEqual([200]);
      expect(text).toMatch(/\r\nconnection: close\r\n/i);
      expect(slow.received.length).toBe(1);
    } finally {
      await slow.close();
    }
  });
});

describe('a body the gateway cannot read, on a keep-alive connection', () => {
  it.each([PATHS.front, PATHS.router])('%s: 413, and the connection is closed rather than the rest of the body read', async (path) => {
    const started = performance.now();
    const text = await rawHttp(
      gateway.origin,
      `POST ${path} HTTP/1.1\r\nHost: gw\r\n${KEY}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunked('x'.repeat(BODY_LIMIT + 1)).slice(0, -5)}`,
      5_000,
    );
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    // The client never ended its body: only the gateway closing the connection ends the exchange.
    expect(performance.now() - started).toBeLessThan(4_000);
  });
});

describe('which way a request goes', () => {
  it("a rescued endpoint's own path never reaches fastify's hooks; a path the router must decode does", async () => {
    const app = buildServer(validateConfig({ upstream: { url: upstream.baseUrl }, server: { port: 0 } }), { logStream: new Writable({ write: (_c, _e, done) => done() }) });
    const seen: string[] = [];
    app.addHook('onRequest', (request, _reply, done) => {
      seen.push(request.url);
      done();
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      for (const path of ['/v1/chat/completions', '/v1/responses?api-version=1', '/v1/messages', '/%76%31/chat/completions']) {
        const res = await fetch(`${origin}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat });
        expect(res.status, path).toBe(200);
        await res.text();
      }
      expect(seen).toEqual(['/%76%31/chat/completions']);
    } finally {
      await app.close();
    }
  });
});
