import { Readable } from 'node:stream';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { request } from 'undici';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { Client, expectGoogleError, expectOpenAIError, rawStatus, settle } from './helpers.js';
import { abortTolerantUpstream, slowClient, type SlowClient, type TolerantUpstream } from './transport-helpers.js';

/*
 * server.bodyLimitBytes holds on the pass-through routes (/v1/embeddings, /v1/files, /v1beta/...)
 * as on the rescued ones, though their bodies stream upstream as they arrive: a declared length
 * over the limit is refused before a byte is read or sent, and a chunked body is counted on its
 * way and its upstream request aborted the moment it passes the limit. Either way the client gets
 * a 413 in the gateway's error shape, and the connection closes (it may still be sending).
 */

const LIMIT = 64 * 1024;
let upstream: TolerantUpstream;
let gateway: TestGateway;
const client = new Client();
const opened: SlowClient[] = [];

beforeAll(async () => {
  upstream = await abortTolerantUpstream();
  gateway = await startGateway({ upstream: { url: upstream.baseUrl }, server: { bodyLimitBytes: LIMIT } });
});
afterEach(() => {
  for (const c of opened.splice(0)) c.socket.destroy();
  upstream.seen.length = 0;
});
afterAll(async () => {
  await client.close();
  await gateway.close();
  await upstream.close();
});

describe('a declared body over the limit', () => {
  it('through the openai SDK: embeddings.create gets a 413 request_too_large, nothing goes upstream', async () => {
    const sdk = new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'sk-test', maxRetries: 0, timeout: 15_000 });
    const err = await sdk.embeddings.create({ model: 'text-embedding-3-small', input: 'x'.repeat(LIMIT) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe('request_too_large');
    expect(upstream.seen).toHaveLength(0);
  });

  it.each(['/v1/embeddings', '/v1/files', '/v1beta/models/gemini-2.5-pro:countTokens'])(
    'on %s: 413 before the body is read, and the connection closes',
    async (path) => {
      const head = `POST ${path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: ${LIMIT + 1}\r\n\r\n`;
      const c = await slowClient(gateway.origin, head, opened);
      expect(await c.closedWithin(5_000), c.received()).toBe(true);
      const answer = rawStatus(c.received());
      expect(answer.status, c.received()).toBe(413);
      if (path.startsWith('/v1beta/')) expectGoogleError(JSON.parse(answer.body), 'request_too_large', 413, 'INVALID_ARGUMENT');
      else expectOpenAIError(JSON.parse(answer.body), 'request_too_large');
      expect(c.received()).toMatch(/\r\nconnection: close\r\n/i);
      expect(upstream.seen, c.received()).toHaveLength(0);
    },
  );
});

describe('a compressed body', () => {
  // 64 KiB of JSON decoded is over the limit by its padding; a few hundred bytes on the wire.
  const decoded = Buffer.from(JSON.stringify({ model: 'text-embedding-3-small', input: ' '.repeat(LIMIT * 16) }));
  const small = Buffer.from(JSON.stringify({ model: 'text-embedding-3-small', input: 'the quick brown fox' }));
  const codings: Array<[string, (b: Buffer) => Buffer]> = [
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['deflate', deflateRawSync],
    ['br', brotliCompressSync],
    ['gzip, br', (b) => brotliCompressSync(gzipSync(b))],
  ];

  it.each(codings)('in %s, decoding past the limit: 413, the upstream request aborted', async (coding, encode) => {
    const sent = encode(decoded);
    expect(sent.length).toBeLessThan(LIMIT / 8);
    const res = await client.post(`${gateway.baseUrl}/embeddings`, sent, { 'content-encoding': coding }, AbortSignal.timeout(15_000));
    expect(res.status).toBe(413);
    expectOpenAIError(res.json, 'request_too_large');
    const seen = await settle(
      () => upstream.seen.map((s) => s.outcome),
      (o) => !o.includes('pending'),
    );
    expect(seen).not.toContain('whole');
  });

  it.each(codings)('in %s, within the limit: forwarded as sent, still compressed', async (coding, encode) => {
    const sent = encode(small);
    const res = await client.post(`${gateway.baseUrl}/embeddings`, sent, { 'content-encoding': coding }, AbortSignal.timeout(15_000));
    expect(res.status).toBe(200);
    expect(upstream.seen).toHaveLength(1);
    expect(upstream.seen[0]).toMatchObject({ bytes: sent.length, outcome: 'whole' });
    expect(upstream.seen[0].headers['content-encoding']).toBe(coding);
  });

  it('a Gemini pass-through path too', async () => {
    const res = await client.post(
      `${gateway.origin}/v1beta/models/gemini-2.5-pro:countTokens`,
      gzipSync(decoded),
      { 'content-encoding': 'gzip' },
      AbortSignal.timeout(15_000),
    );
    expect(res.status).toBe(413);
    expectGoogleError(res.json, 'request_too_large', 413, 'INVALID_ARGUMENT');
  });

  it('a coding the gateway cannot undo goes as sent, and a corrupt body too', async () => {
    for (const [coding, sent] of [
      ['compress', gzipSync(decoded)],
      ['gzip', Buffer.from('not gzip at all')],
    ] as const) {
      upstream.seen.length = 0;
      const res = await client.post(`${gateway.baseUrl}/embeddings`, sent, { 'content-encoding': coding }, AbortSignal.timeout(15_000));
      expect(res.status, coding).toBe(200);
      expect(upstream.seen[0]).toMatchObject({ bytes: sent.length, outcome: 'whole' });
    }
  });
});

describe('headers past the count Node kept by default', () => {
  it('a body whose Content-Length follows 2,000 other headers goes upstream whole, with its length', async () => {
    const body = JSON.stringify({ model: 'text-embedding-3-small', input: 'the quick brown fox' });
    const padding = Array.from({ length: 2_000 }, (_, i) => `p${i % 10}:1\r\n`).join('');
    const head = `POST /v1/embeddings HTTP/1.1\r\nHost: gateway\r\n${padding}Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
    const c = await slowClient(gateway.origin, head + body, opened, '');
    expect(await c.closedWithin(5_000), c.received()).toBe(true);
    expect(rawStatus(c.received()).status, c.received()).toBe(200);
    expect(upstream.seen).toHaveLength(1);
    expect(upstream.seen[0]).toMatchObject({ method: 'POST', bytes: body.length, outcome: 'whole' });
    expect(upstream.seen[0].headers['content-length']).toBe(String(body.length));
  });
});

describe('a chunked body', () => {
  /** A chunked POST of `total` bytes in 8 KiB chunks, read to its end. */
  async function postChunked(path: string, total: number) {
    async function* chunks() {
      for (let sent = 0; sent < total; sent += 8192) yield Buffer.alloc(Math.min(8192, total - sent), 0x61);
    }
    const res = await request(`${gateway.origin}${path}`, {
      method: 'POST',
      dispatcher: client.agent,
      headers: { 'content-type': 'application/octet-stream' },
      // Without a length, undici sends an iterable body chunked.
      body: Readable.from(chunks()),
      signal: AbortSignal.timeout(15_000),
    }).catch((err: Error) => err);
    if (res instanceof Error) return { error: res };
    return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
  }

  it('passing the limit on its way up: 413 request_too_large, and the upstream request is aborted', async () => {
    const res = await postChunked('/v1/files', LIMIT * 4);
    expect(res).toMatchObject({ status: 413 });
    expectOpenAIError(JSON.parse((res as { text: string }).text), 'request_too_large');
    expect((res as { headers: Record<string, unknown> }).headers.connection).toBe('close');
    // Whatever the stand-in saw of it ended without its body.
    const seen = await settle(
      () => upstream.seen.map((s) => s.outcome),
      (o) => !o.includes('pending'),
    );
    expect(seen).not.toContain('whole');
    expect(upstream.seen.every((s) => s.bytes <= LIMIT)).toBe(true);
  });

  /** What reached the upstream whole; the previous case's aborted request may still be arriving. */
  const whole = () => upstream.seen.filter((s) => s.outcome === 'whole');

  it('within the limit: forwarded whole, its framing as HTTP allows', async () => {
    const res = await postChunked('/v1/files', LIMIT - 100);
    expect(res).toMatchObject({ status: 200 });
    expect(whole()).toHaveLength(1);
    expect(whole()[0]).toMatchObject({ url: '/v1/files', bytes: LIMIT - 100 });
    // Chunked as it came, or (undici's choice when the body has all arrived before it writes, as on
    // Node 26) with its length; never both, never a length that is not the body's.
    const { 'transfer-encoding': chunked, 'content-length': length } = whole()[0].headers;
    if (length === undefined) expect(chunked).toBe('chunked');
    else expect([chunked, length]).toEqual([undefined, String(LIMIT - 100)]);
  });

  it('exactly at the limit: forwarded', async () => {
    const res = await postChunked('/v1/embeddings', LIMIT);
    expect(res).toMatchObject({ status: 200 });
    expect(whole()).toHaveLength(1);
    expect(whole()[0]).toMatchObject({ bytes: LIMIT });
  });
});

it('a declared body within the limit streams upstream byte for byte', async () => {
  const body = JSON.stringify({ model: 'text-embedding-3-small', input: 'y'.repeat(LIMIT - 100) });
  const res = await client.post(`${gateway.baseUrl}/embeddings`, body);
  expect(res.status).toBe(200);
  expect(upstream.seen[0]).toMatchObject({ url: '/v1/embeddings', bytes: Buffer.byteLength(body), outcome: 'whole' });
  expect(upstream.seen[0].headers['content-length']).toBe(String(Buffer.byteLength(body)));
});
