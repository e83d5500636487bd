import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { Client, expectOpenAIError, rawHttp, rawStatus } from './helpers.js';

/*
 * Odd request bodies on /v1/chat/completions. The gateway does not read a body on its way in, so
 * each goes upstream byte for byte and the upstream's answer comes back (the gateway's own error
 * only for what it must refuse: a body over its size limit, sent or decoded); never a 500, a crash or a hang.
 */

const BODY_LIMIT = 8 * 1024 * 1024;
const msgs = (messages: unknown) => JSON.stringify({ model: 'm', messages });
const nested = (depth: number, inner = '"x"') => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;

type Expect = { forwarded: true } | { status: number; code: string };
const FORWARDED: Expect = { forwarded: true };
const gatewayError = (status: number, code: string): Expect => ({ status, code });

/** [name, body, extra headers, what must happen] */
const cases: Array<[string, string | Buffer, Record<string, string>, Expect]> = [
  // Not JSON at all: the upstream's to judge.
  ['an unterminated object', '{"model":"m","messages":[', {}, FORWARDED],
  ['a trailing comma', '{"model":"m",}', {}, FORWARDED],
  ['single quotes', "{'model':'m'}", {}, FORWARDED],
  ['NaN', 'NaN', {}, FORWARDED],
  ['trailing garbage', '{"model":"m"} x', {}, FORWARDED],
  ['binary garbage', Buffer.from([0x00, 0xff, 0xfe, 0x7b, 0x80]), {}, FORWARDED],
  ['only whitespace', ' \n\t ', {}, FORWARDED],
  ['an empty body', '', {}, FORWARDED],
  // JSON, but not what a chat request looks like: the upstream judges it.
  ['JSON that is an array', '[{"role":"user","content":"hi"}]', {}, FORWARDED],
  ['JSON that is a string', '"hello"', {}, FORWARDED],
  ['JSON that is a number', '42', {}, FORWARDED],
  ['JSON null', 'null', {}, FORWARDED],
  ['JSON true', 'true', {}, FORWARDED],
  ['messages missing', '{"model":"m"}', {}, FORWARDED],
  ['messages a string', msgs('hi'), {}, FORWARDED],
  ['messages null', msgs(null), {}, FORWARDED],
  ['messages an object', msgs({ role: 'user', content: 'hi' }), {}, FORWARDED],
  ['messages empty', msgs([]), {}, FORWARDED],
  ['messages of the wrong types', msgs([1, 'a', null, [], true]), {}, FORWARDED],
  ['a message without a role', msgs([{ content: 'hi' }]), {}, FORWARDED],
  ['a role that is not a string', msgs([{ role: 5, content: 'hi' }]), {}, FORWARDED],
  ['an unknown role', msgs([{ role: 'wizard', content: 'hi' }]), {}, FORWARDED],
  [
    'content as a parts array',
    msgs([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'hi' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        ],
      },
    ]),
    {},
    FORWARDED,
  ],
  ['content null', msgs([{ role: 'user', content: null }]), {}, FORWARDED],
  ['content an object', msgs([{ role: 'user', content: { text: 'hi' } }]), {}, FORWARDED],
  ['a 5 MB content string', msgs([{ role: 'user', content: 'x'.repeat(5_000_000) }]), {}, FORWARDED],
  ['an escaped lone surrogate', '{"model":"m","messages":[{"role":"user","content":"a\\ud800b\\udfff"}]}', {}, FORWARDED],
  [
    'a raw (CESU-8) lone surrogate',
    Buffer.concat([
      Buffer.from('{"model":"m","messages":[{"role":"user","content":"'),
      Buffer.from([0xed, 0xa0, 0x80]),
      Buffer.from('"}]}'),
    ]),
    {},
    FORWARDED,
  ],
  [
    'invalid UTF-8 inside a string',
    Buffer.concat([
      Buffer.from('{"model":"m","messages":[{"role":"user","content":"'),
      Buffer.from([0xc3, 0x28, 0xff]),
      Buffer.from('"}]}'),
    ]),
    {},
    FORWARDED,
  ],
  [
    'NUL, U+2028, BOM, RTL override, ZWJ emoji, U+FFFF',
    msgs([{ role: 'user', content: '\u0000\u2028\u2029\uFEFF\u202E\u{1F468}\u200D\u{1F469}\uFFFF\u{10FFFF}' }]),
    {},
    FORWARDED,
  ],
  ['a leading byte-order mark', `\uFEFF${msgs([{ role: 'user', content: 'hi' }])}`, {}, FORWARDED],
  [
    'duplicate keys',
    '{"model":"m","messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}],"model":"n"}',
    {},
    FORWARDED,
  ],
  ['100k nested arrays', nested(100_000), {}, FORWARDED],
  ['100k nested objects', `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`, {}, FORWARDED],
  ['content nested 100k deep', msgs([{ role: 'user', content: 'PLACEHOLDER' }]).replace('"PLACEHOLDER"', nested(100_000)), {}, FORWARDED],
  // Content types: the route reads every body as JSON and forwards the client's content-type.
  ['content-type text/plain', msgs([{ role: 'user', content: 'hi' }]), { 'content-type': 'text/plain' }, FORWARDED],
  [
    'content-type form-urlencoded',
    msgs([{ role: 'user', content: 'hi' }]),
    { 'content-type': 'application/x-www-form-urlencoded' },
    FORWARDED,
  ],
  [
    'content-type with odd parameters',
    msgs([{ role: 'user', content: 'hi' }]),
    { 'content-type': 'application/json; charset=latin1; foo="bar"' },
    FORWARDED,
  ],
  ['not JSON under text/plain', 'hello', { 'content-type': 'text/plain' }, FORWARDED],
  // Size.
  ['a body over the limit', msgs([{ role: 'user', content: 'x'.repeat(BODY_LIMIT) }]), {}, gatewayError(413, 'request_too_large')],
  // Compressed bodies: forwarded as sent, decoded (bounded by the body limit) on the way in; past the limit, refused.
  ['a gzip body', gzipSync(msgs([{ role: 'user', content: 'hi' }])), { 'content-encoding': 'gzip' }, FORWARDED],
  ['a deflate body', deflateSync(msgs([{ role: 'user', content: 'hi' }])), { 'content-encoding': 'deflate' }, FORWARDED],
  ['a raw deflate body', deflateRawSync(msgs([{ role: 'user', content: 'hi' }])), { 'content-encoding': 'deflate' }, FORWARDED],
  ['a br body', brotliCompressSync(msgs([{ role: 'user', content: 'hi' }])), { 'content-encoding': 'br' }, FORWARDED],
  ['gzip then br', brotliCompressSync(gzipSync(msgs([{ role: 'user', content: 'hi' }]))), { 'content-encoding': 'gzip, br' }, FORWARDED],
  ['content-encoding identity', msgs([{ role: 'user', content: 'hi' }]), { 'content-encoding': 'identity' }, FORWARDED],
  ['gzip that is not gzip', 'plainly not gzip', { 'content-encoding': 'gzip' }, FORWARDED],
  [
    'truncated gzip',
    gzipSync(msgs([{ role: 'user', content: 'x'.repeat(10_000) }])).subarray(0, 40),
    { 'content-encoding': 'gzip' },
    FORWARDED,
  ],
  ['gzip of something that is not JSON', gzipSync('hello'), { 'content-encoding': 'gzip' }, FORWARDED],
  [
    'a gzip bomb (65 KB that inflates to 65 MiB, past the limit)',
    gzipSync(Buffer.alloc(65 * 1024 * 1024, 0x20)),
    { 'content-encoding': 'gzip' },
    gatewayError(413, 'request_too_large'),
  ],
  ['an unknown content-encoding', msgs([{ role: 'user', content: 'hi' }]), { 'content-encoding': 'x-custom' }, FORWARDED],
  ['content-encoding compress', msgs([{ role: 'user', content: 'hi' }]), { 'content-encoding': 'compress' }, FORWARDED],
];

let upstream: FakeUpstream;
let gateway: TestGateway;
const client = new Client();

beforeAll(async () => {
  upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('upstream answer'), { 'x-from': 'upstream' }));
  gateway = await startGateway({ upstream: { url: upstream.baseUrl }, server: { bodyLimitBytes: BODY_LIMIT } });
});
afterAll(async () => {
  await client.close();
  await gateway.close();
  await upstream.close();
});

describe('odd bodies on the chat route', () => {
  it.each(cases)('%s', async (_name, body, headers, expected) => {
    const before = upstream.received.length;
    const started = performance.now();
    const res = await client.post(`${gateway.baseUrl}/chat/completions`, body, headers, AbortSignal.timeout(10_000));
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(res.status).not.toBe(500);
    if ('forwarded' in expected) {
      expect(res.status).toBe(200);
      expect(res.headers['x-from']).toBe('upstream');
      expect(upstream.received.length).toBe(before + 1);
      const got = upstream.received.at(-1)!;
      expect(got.body.equals(Buffer.isBuffer(body) ? body : Buffer.from(body))).toBe(true);
      if (headers['content-type']) expect(got.headers['content-type']).toBe(headers['content-type']);
      if (headers['content-encoding']) expect(got.headers['content-encoding']).toBe(headers['content-encoding']);
    } else {
      expect(res.status).toBe(expected.status);
      expectOpenAIError(res.json, expected.code);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(upstream.received.length).toBe(before);
    }
  });

  it('a gzip body that inflates just past the configured limit is refused with a 413, and not forwarded; one just within it goes', async () => {
    const before = upstream.received.length;
    const over = await client.post(`${gateway.baseUrl}/chat/completions`, gzipSync(Buffer.alloc(BODY_LIMIT + 1, 0x20)), {
      'content-encoding': 'gzip',
    });
    expect(over.status).toBe(413);
    expectOpenAIError(over.json, 'request_too_large');
    expect(upstream.received.length).toBe(before);
    const within = gzipSync(Buffer.alloc(BODY_LIMIT, 0x20));
    const res = await client.post(`${gateway.baseUrl}/chat/completions`, within, { 'content-encoding': 'gzip' });
    expect(res.status).toBe(200);
    expect(upstream.received.at(-1)!.body.equals(within)).toBe(true);
  });

  it('a body without any content-type is read as JSON and forwarded', async () => {
    const body = msgs([{ role: 'user', content: 'hi' }]);
    const res = rawStatus(
      await rawHttp(
        gateway.origin,
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      ),
    );
    expect(res.status).toBe(200);
    expect(upstream.received.at(-1)!.body.toString()).toBe(body);
    expect(upstream.received.at(-1)!.headers['content-type']).toBeUndefined();
  });

  it('a body shorter than its content-length does not hang the gateway', async () => {
    const before = upstream.received.length;
    const started = performance.now();
    const res = await rawHttp(
      gateway.origin,
      'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":',
      1_000,
    );
    // The client went quiet: the gateway waits for the rest (the client's socket timeout decides).
    expect(res).toBe('');
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(upstream.received.length).toBe(before);
  });

  it('a chunked body with a broken chunk size gets a 400, not a crash', async () => {
    const res = rawStatus(
      await rawHttp(
        gateway.origin,
        'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n',
      ),
    );
    expect(res.status).toBe(400);
  });

  it('still answers normally after all of the above', async () => {
    const res = await client.post(`${gateway.baseUrl}/chat/completions`, msgs([{ role: 'user', content: 'hi' }]));
    expect(res.status).toBe(200);
    expect(res.json.choices[0].message.content).toBe('upstream answer');
    expect(gateway.logLines().filter((l) => l.level >= 50)).toEqual([]);
  });
});
