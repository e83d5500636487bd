import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { validateConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { buildServer } from '../../src/server.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completion, json, sse, startFakeUpstream, streamEvents, type FakeUpstream } from '../helpers/fake-upstream.js';
import { overlongError } from '../reliability/helpers.js';
import { agentRequest } from '../helpers/rescue.js';

/*
 * Every request reaches its endpoint one way: fastify's route, on every address the gateway
 * listens on. With the host `localhost` that is two servers, 127.0.0.1 and ::1 (src/http/listeners.ts):
 * each case below is sent over both, and the client's bytes, the upstream's request, the access
 * line and the metrics must be the same, as must the drain on shutdown.
 */

const GATEWAY_KEY = 'gw-key-one-way-in';
const BODY_LIMIT = 64 * 1024;
const PATH = '/v1/chat/completions';
const FAMILIES = { v4: '127.0.0.1', v6: '::1' };

interface LocalGateway {
  app: FastifyInstance;
  port: number;
  logLines(): any[];
}

/** The real gateway listening on `localhost`, as `npm start` with `server.host: localhost` does. */
async function startLocalhost(config: ConfigInput): Promise<LocalGateway> {
  const chunks: string[] = [];
  const logStream = new Writable({
    write(chunk, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  // Window discovery off: its GETs go once per gateway, so the first address would see them and the second not.
  const app = buildServer(
    validateConfig({
      ...config,
      upstream: { discoverWindows: false, ...config.upstream },
      log: { level: 'info' },
      server: { port: 0, ...config.server },
    }),
    { logStream },
  );
  await app.listenOn('localhost', 0);
  return {
    app,
    port: (app.server.address() as AddressInfo).port,
    logLines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line)),
  };
}

/** Writes `text` on a new connection to `host` and reads until the gateway closes it. */
function rawHttp(host: string, port: number, text: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, host, () => socket.write(text));
    let out = '';
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    socket.setEncoding('latin1');
    socket.on('data', (d) => (out += d));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    socket.on('error', () => undefined);
  });
}

let upstream: FakeUpstream;
let gateway: LocalGateway;

beforeAll(async () => {
  upstream = await startFakeUpstream(async (req, res) => {
    if (req.json?.stream) return sse(res, streamEvents(['a', 'b']));
    if (req.json?.overlong && !req.headers['x-gateway-compaction'])
      return json(res, 400, JSON.parse(overlongError(req.body.length, 20_000)));
    json(res, 200, completion(`seen ${req.body.length} bytes`), { 'x-request-id': 'upstream-id-1' });
  });
  gateway = await startLocalhost({
    upstream: { url: upstream.baseUrl, apiKey: 'sk-upstream' },
    server: { bodyLimitBytes: BODY_LIMIT },
    auth: { keys: [GATEWAY_KEY] },
    summarizer: { url: upstream.baseUrl },
    // Each case is sent twice: the second must not find the first's compaction remembered.
    memory: { enabled: false },
  });
});
afterAll(async () => {
  await gateway.app.close();
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

/** Sends one raw HTTP/1.1 request to `path` over `host` and collects what everyone saw of it. */
async function send(host: string, path: string, head: string, body = ''): Promise<Seen> {
  const upstreamBefore = upstream.received.length;
  const linesBefore = gateway.logLines().length;
  const metricsBefore = await metricText();
  const text = await rawHttp(host, gateway.port, `POST ${path} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n${head}\r\n${body}`, 5_000);
  const [top, ...rest] = text.split('\r\n\r\n');
  const [statusLine, ...headerLines] = top.split('\r\n');
  const lines = gateway.logLines().slice(linesBefore);
  const access = lines.find((l) => l.msg === 'request completed');
  return withoutTimings({
    status: Number(statusLine.split(' ')[1]),
    headers: headerLines
      .map((h) => h.toLowerCase())
      .filter((h) => !/^(date|x-request-id):/.test(h))
      .sort(),
    body: rest.join('\r\n\r\n'),
    upstream: upstream.received.slice(upstreamBefore).map((r) => {
      const { 'x-request-id': _id, ...headers } = r.headers;
      // The one thing that differs by address: which loopback the client came from.
      if (headers['x-forwarded-for'] === host) headers['x-forwarded-for'] = 'the client';
      return { url: r.url, headers, body: r.body.toString('latin1') };
    }),
    accessLine: access && {
      ...access,
      time: undefined,
      requestId: undefined,
      durationMs: undefined,
      upstreamTtfbMs: undefined,
      path: undefined,
    },
    metrics: countsChangedSince(metricsBefore, await metricText()),
  });
}

/** The compaction header's own timing differs from run to run. */
function withoutTimings(seen: Seen): Seen {
  return JSON.parse(JSON.stringify(seen).replace(/summarizer-ms=\d+/g, 'summarizer-ms=N'));
}

async function metricText(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${gateway.port}/metrics`);
  return res.text();
}

/** The counter and histogram-count lines that moved, with how much; timings' buckets left out. */
function countsChangedSince(before: string, after: string): string {
  const value = (text: string) =>
    new Map(
      text
        .split('\n')
        .filter((l) => /^gateway_\w+(_total|_count)\{/.test(l))
        .map((l) => [l.slice(0, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1))]),
    );
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
  [
    'a chunked body over the limit',
    `${KEY}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n`,
    chunked('x'.repeat(BODY_LIMIT + 1)),
    413,
  ],
  [
    'a declared length over the limit',
    `${KEY}Content-Type: application/json\r\nContent-Length: ${BODY_LIMIT + 1}\r\n`,
    'x'.repeat(BODY_LIMIT + 1),
    413,
  ],
  ['a broken chunk size', `${KEY}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n`, 'ZZ\r\n{}\r\n0\r\n\r\n', 400],
  ['no gateway key', `Content-Type: application/json\r\n${length(chat)}`, chat, 401],
  ['a wrong gateway key', `Authorization: Bearer nope\r\nContent-Type: application/json\r\n${length(chat)}`, chat, 401],
  ['the key as x-api-key', `X-Api-Key: ${GATEWAY_KEY}\r\nContent-Type: application/json\r\n${length(chat)}`, chat, 200],
  ['no content type', `${KEY}${length(chat)}`, chat, 200],
  ['a content type without a subtype', `${KEY}Content-Type: json\r\n${length(chat)}`, chat, 415],
  ['an empty body', `${KEY}Content-Type: application/json\r\nContent-Length: 0\r\n`, '', 200],
];

describe('localhost: 127.0.0.1 and ::1 answer alike', () => {
  it.each(cases)('%s', async (name, head, body, status) => {
    const query = name.includes('query') ? '?api-version=1' : '';
    const v4 = await send(FAMILIES.v4, `${PATH}${query}`, head, body);
    const v6 = await send(FAMILIES.v6, `${PATH}${query}`, head, body);
    expect(v4.status).toBe(status);
    expect(v6).toEqual(v4);
    // A chunk size Node's parser refuses is answered by its client-error handler: no route ran, no access line.
    if (name === 'a broken chunk size') expect(v4.accessLine).toBeUndefined();
    else expect(v4.accessLine).toMatchObject({ status, method: 'POST' });
    if (status === 200) expect(v4.upstream.length).toBeGreaterThan(0);
    else expect(v4.upstream).toEqual([]);
  });

  it('a path the router decodes first (/%76%31/… is /v1/…) is the same endpoint', async () => {
    const head = `${KEY}Content-Type: application/json\r\n${length(overlong)}`;
    const plain = await send(FAMILIES.v6, PATH, head, overlong);
    const encoded = await send(FAMILIES.v6, '/%76%31/chat/completions', head, overlong);
    expect(plain.headers.some((h) => h.startsWith('x-gateway-compaction:'))).toBe(true);
    expect(encoded).toEqual(plain);
  });

  it("each answer carries its own request id, the client's when it sent a sane one", async () => {
    const text = await rawHttp(
      FAMILIES.v6,
      gateway.port,
      `POST ${PATH} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n${KEY}Content-Type: application/json\r\nX-Request-Id: client-id-9\r\n${length(chat)}\r\n${chat}`,
      5_000,
    );
    expect(text).toMatch(/\r\nx-request-id: client-id-9\r\n/i);
    expect(upstream.received.at(-1)!.headers['x-request-id']).toBe('client-id-9');
    const line = gateway.logLines().findLast((l) => l.msg === 'request completed');
    expect(line).toMatchObject({ requestId: 'client-id-9', path: PATH, status: 200, model: 'gpt-test' });
  });

  it.each(Object.values(FAMILIES))(
    '%s: a body the gateway cannot read on a keep-alive connection gets 413, and the connection is closed rather than the rest read',
    async (host) => {
      const started = performance.now();
      const text = await rawHttp(
        host,
        gateway.port,
        `POST ${PATH} HTTP/1.1\r\nHost: gw\r\n${KEY}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunked('x'.repeat(BODY_LIMIT + 1)).slice(0, -5)}`,
        5_000,
      );
      expect(text).toMatch(/^HTTP\/1\.1 413 /);
      expect(text).toMatch(/\r\nconnection: close\r\n/i);
      // The client never ended its body: only the gateway closing the connection ends the exchange.
      expect(performance.now() - started).toBeLessThan(4_000);
    },
  );

  it.each(Object.values(FAMILIES))(
    '%s: a request Node refuses before any route (a NUL in a header) gets the OpenAI-shaped 400',
    async (host) => {
      const text = await rawHttp(
        host,
        gateway.port,
        `POST ${PATH} HTTP/1.1\r\nHost: gw\r\nX-Bad: a\u0000b\r\nContent-Length: 2\r\n\r\n{}`,
        5_000,
      );
      expect(text).toMatch(/^HTTP\/1\.1 400 /);
      expect(text).toMatch(/"code":"bad_request"/);
      expect(text).toMatch(/\r\nconnection: close\r\n/i);
    },
  );
});

describe('the drain on shutdown, over both addresses', () => {
  it('requests in flight on either address finish; one that arrives after close began is not served; idle connections close', async () => {
    const slow = await startFakeUpstream(async (_req, res) => {
      await new Promise((r) => setTimeout(r, 400));
      json(res, 200, completion('slow'));
    });
    const closing = await startLocalhost({
      upstream: { url: slow.baseUrl },
      server: { headersTimeoutMs: 0, requestTimeoutMs: 0, keepAliveTimeoutMs: 0 },
    });
    try {
      const one = (close: boolean) =>
        `POST ${PATH} HTTP/1.1\r\nHost: gw\r\n${close ? 'Connection: close\r\n' : ''}Content-Type: application/json\r\n${length(chat)}\r\n${chat}`;
      const open = (host: string) => {
        const socket = connect(closing.port, host);
        const seen = { text: '', closed: false };
        socket.setEncoding('latin1').on('data', (d) => (seen.text += d));
        const ended = new Promise<void>((r) => socket.on('close', () => r()));
        return { socket, seen, ended };
      };
      const busy = Object.values(FAMILIES).map(open);
      // A connection that never sends a request (a pre-connecting client) on the second address.
      const idle = open(FAMILIES.v6);
      for (const c of busy) c.socket.write(one(false));
      await new Promise((r) => setTimeout(r, 100));
      const startedClosing = performance.now();
      const closed = closing.app.close();
      const idler = setInterval(() => closing.app.closeIdleConnections(), 50);
      await new Promise((r) => setTimeout(r, 100));
      // The first requests are still upstream; a second comes in on each connection after close began.
      for (const c of busy) c.socket.write(one(true));
      await Promise.all([...busy.map((c) => c.ended), idle.ended, closed]);
      clearInterval(idler);
      for (const c of busy) {
        const statuses = [...c.seen.text.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => Number(m[1]));
        // Node ends a connection that was busy when close began once its answer is out.
        expect(statuses).toEqual([200]);
        expect(c.seen.text).toMatch(/\r\nconnection: close\r\n/i);
      }
      expect(idle.seen.text).toBe('');
      expect(slow.received.length).toBe(2);
      expect(performance.now() - startedClosing).toBeLessThan(3_000);
      // Neither address takes a connection after the close.
      for (const host of Object.values(FAMILIES)) {
        const refused = await new Promise<string>((resolve) =>
          connect(closing.port, host)
            .on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? ''))
            .on('connect', () => resolve('connected')),
        );
        expect(refused, host).toBe('ECONNREFUSED');
      }
      const lines = closing.logLines().filter((l) => l.msg === 'request completed');
      // The ones that came after close began were refused (503 shutting_down, never sent upstream), an answer the closing connection never carries.
      expect(lines.map((l) => l.status).sort()).toEqual([200, 200, 503, 503]);
    } finally {
      await slow.close();
    }
  });
});

describe('which way a request goes', () => {
  it("every rescued endpoint's request passes fastify's hooks, whichever path spells it", async () => {
    const app = buildServer(validateConfig({ upstream: { url: upstream.baseUrl }, server: { port: 0 } }), {
      logStream: new Writable({ write: (_c, _e, done) => done() }),
    });
    const seen: string[] = [];
    app.addHook('onRequest', (request, _reply, done) => {
      seen.push(request.url);
      done();
    });
    await app.listenOn('localhost', 0);
    try {
      const port = (app.server.address() as AddressInfo).port;
      const paths = ['/v1/chat/completions', '/v1/responses?api-version=1', '/v1/messages', '/%76%31/chat/completions'];
      for (const [i, path] of paths.entries()) {
        const host = i % 2 === 0 ? '127.0.0.1' : '[::1]';
        const res = await fetch(`http://${host}:${port}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: chat,
        });
        expect(res.status, path).toBe(200);
        await res.text();
      }
      expect(seen).toEqual(paths);
    } finally {
      await app.close();
    }
  });
});
