import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { COMPACTION_HEADER, markedHeaders, modelOf, optedOut } from '../../src/rescue/context.js';
import { MAX_COMPACTABLE_DEPTH, readIncoming } from '../../src/rescue/request.js';

/*
 * The client's request as the rescue reads it: decoded whatever its encoding, parsed only when
 * asked, and refused (never compacted, still forwarded) when it is not a JSON object the gateway
 * can serialise again.
 */

const body = { model: 'gpt-x', messages: [{ role: 'user', content: 'hello '.repeat(50) }] };
const raw = Buffer.from(JSON.stringify(body));

describe('readIncoming: decoding', () => {
  it.each([
    ['no encoding', raw, undefined],
    ['identity', raw, 'identity'],
    ['gzip', zlib.gzipSync(raw), 'gzip'],
    ['x-gzip, any case and spacing', zlib.gzipSync(raw), ' X-GZIP '],
    ['deflate (zlib)', zlib.deflateSync(raw), 'deflate'],
    ['raw deflate sent as deflate', zlib.deflateRawSync(raw), 'deflate'],
    ['br', zlib.brotliCompressSync(raw), 'br'],
    ['gzip then br, undone last first', zlib.brotliCompressSync(zlib.gzipSync(raw)), 'gzip, br'],
    ['identity and empty codings skipped', zlib.gzipSync(raw), 'identity, ,gzip'],
  ])('%s', (_name, sent, encoding) => {
    const incoming = readIncoming(sent, encoding);
    expect(incoming.raw).toBe(sent);
    expect(incoming.bytes).toBe(raw.length);
    expect(incoming.json).toEqual(body);
  });

  it('an unknown coding, or a corrupt body, cannot be read: no JSON, no size, the bytes still forwarded', () => {
    for (const [sent, encoding] of [
      [zlib.deflateSync(raw), 'zstd'],
      [zlib.gzipSync(raw), 'compress'],
      [raw, 'gzip'],
      [raw, 'br'],
      [Buffer.from('not deflate at all'), 'deflate'],
    ] as const) {
      const incoming = readIncoming(sent, encoding);
      expect(incoming.bytes).toBe(0);
      expect(incoming.json).toBeNull();
      expect(incoming.raw).toBe(sent);
    }
  });

  it('a decoded size over the body limit is refused, for every coding', () => {
    const big = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(10_000) }] }));
    for (const [sent, encoding] of [
      [zlib.gzipSync(big), 'gzip'],
      [zlib.deflateSync(big), 'deflate'],
      [zlib.deflateRawSync(big), 'deflate'],
      [zlib.brotliCompressSync(big), 'br'],
    ] as const) {
      expect(readIncoming(sent, encoding, 5_000).json).toBeNull();
      expect(readIncoming(sent, encoding, big.length).bytes).toBe(big.length);
    }
  });

  it('the default limit is the default body limit, 64 MiB: a small bomb does not inflate past it', () => {
    const bomb = zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024 + 1, 0x20));
    expect(bomb.length).toBeLessThan(100_000);
    expect(readIncoming(bomb, 'gzip').bytes).toBe(0);
  });

  it('no body is an empty one', () => {
    const incoming = readIncoming(undefined, undefined);
    expect(incoming.raw).toEqual(Buffer.alloc(0));
    expect(incoming.bytes).toBe(0);
    expect(incoming.json).toBeNull();
  });

  it('nulls inside are ordinary values (an assistant message with tool calls has content null)', () => {
    const withNull = {
      model: 'm',
      messages: [
        { role: 'assistant', content: null, tool_calls: [] },
        { role: 'user', content: 'x' },
      ],
    };
    expect(readIncoming(Buffer.from(JSON.stringify(withNull)), undefined).json).toEqual(withNull);
  });

  it('is lazy and parses once', () => {
    const incoming = readIncoming(raw, undefined);
    expect(incoming.json).toBe(incoming.json);
  });
});

describe('readIncoming: the body as it arrived', () => {
  // The route hands over the chunks Node read; the first attempt sends them as they are.
  const text = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'héllo' }] });
  const whole = Buffer.from(text);

  it('several chunks stay a list on the wire, and are joined only to be read', () => {
    const chunks = [whole.subarray(0, 7), whole.subarray(7, 30), whole.subarray(30)];
    const incoming = readIncoming(chunks, undefined);
    expect(incoming.wire).toBe(chunks);
    expect(incoming.raw).toEqual(whole);
    expect(incoming.bytes).toBe(whole.length);
    expect(incoming.json).toEqual(JSON.parse(text));
  });

  it('one chunk is that buffer; no chunk is an empty body', () => {
    expect(readIncoming([whole], undefined).wire).toBe(whole);
    expect(readIncoming([], undefined).wire).toEqual(Buffer.alloc(0));
    expect(readIncoming([], undefined).json).toBeNull();
  });

  it('a one-byte body is a buffer of one byte, not the byte', () => {
    const one = Buffer.from('7');
    expect(readIncoming(one, undefined).wire).toBe(one);
    expect(readIncoming([one], undefined).raw).toEqual(one);
  });
});

describe('readIncoming: what can be compacted', () => {
  it.each([
    ['not JSON', '{"model":'],
    ['an array', '[{"role":"user"}]'],
    ['a string', '"hello"'],
    ['null', 'null'],
    ['a number', '42'],
  ])('%s is not', (_name, text) => {
    const incoming = readIncoming(Buffer.from(text), undefined);
    expect(incoming.json).toBeNull();
    expect(incoming.bytes).toBe(Buffer.byteLength(text));
  });

  const nested = (depth: number) => {
    // depth counts the request object itself: {messages:[{content:[[...]]}]}
    let value: unknown = 'x';
    for (let i = 0; i < depth - 3; i++) value = [value];
    return { messages: [{ content: value }] };
  };

  it(`nesting up to ${MAX_COMPACTABLE_DEPTH} levels is compacted; one more is forwarded as it came`, () => {
    expect(MAX_COMPACTABLE_DEPTH).toBe(256);
    expect(readIncoming(Buffer.from(JSON.stringify(nested(256))), undefined).json).not.toBeNull();
    expect(readIncoming(Buffer.from(JSON.stringify(nested(257))), undefined).json).toBeNull();
  });

  it('depth is counted through objects as well as arrays, on any branch', () => {
    let deep: unknown = { leaf: true };
    for (let i = 0; i < 300; i++) deep = { next: deep };
    expect(readIncoming(Buffer.from(JSON.stringify({ model: 'm', a: 1, tools: [], deep })), undefined).json).toBeNull();
    expect(readIncoming(Buffer.from(JSON.stringify({ deep, model: 'm' })), undefined).json).toBeNull();
  });
});

describe('the rescue context helpers', () => {
  it('a client opts out with x-gateway-compaction: off, in any case and spacing', () => {
    expect(COMPACTION_HEADER).toBe('x-gateway-compaction');
    expect(optedOut({ clientHeaders: { 'x-gateway-compaction': 'off' } })).toBe(true);
    expect(optedOut({ clientHeaders: { 'x-gateway-compaction': ' OFF ' } })).toBe(true);
    expect(optedOut({ clientHeaders: { 'x-gateway-compaction': 'on' } })).toBe(false);
    expect(optedOut({ clientHeaders: {} })).toBe(false);
  });

  it('a changed body goes out marked, as plain JSON, every other header as sent', () => {
    const headers = { authorization: 'Bearer k', 'content-encoding': 'gzip', 'content-type': 'application/json' };
    expect(markedHeaders(headers, 'outcome=replayed')).toEqual({
      authorization: 'Bearer k',
      'content-type': 'application/json',
      'x-gateway-compaction': 'outcome=replayed',
    });
    expect(headers['content-encoding']).toBe('gzip');
  });

  it('the model a request names: in its path (Gemini), else its body\u2019s, if any', () => {
    const of = (json: Record<string, unknown> | null, pathModel?: string) => modelOf({ pathModel, incoming: { json } as never });
    expect(of({ model: 'm' })).toBe('m');
    expect(of({ model: 3 })).toBeUndefined();
    expect(of(null)).toBeUndefined();
    expect(of({ contents: [] }, 'gemini-3.1-pro-preview')).toBe('gemini-3.1-pro-preview');
    expect(of({ model: 'body' }, 'path')).toBe('path');
  });
});
