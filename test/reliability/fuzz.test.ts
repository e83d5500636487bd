import { Readable } from 'node:stream';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compact } from '../../src/compaction/index.js';
import { jsonBytes } from '../../src/compaction/size.js';
import { sizeTarget } from '../../src/compaction/size-target.js';
import { validateCompaction } from '../../src/compaction/validate.js';
import { validateConfig } from '../../src/config/load.js';
import { GatewayError } from '../../src/http/errors.js';
import { classifyResponse, classifyStreamEvent } from '../../src/overlong/classify.js';
import { readIncoming } from '../../src/rescue/request.js';
import { chat } from '../../src/dialects/chat.js';
import { assertPassthroughPath } from '../../src/routes/passthrough.js';
import { decodeText, firstChunk, holdBody } from '../../src/upstream/body.js';
import { conversationArb, deepFreeze } from '../compaction/conversations.js';
import { fixtures } from '../helpers/fixtures.js';

/*
 * Property-based tests of the pieces every request goes through, complementing
 * test/overlong/robustness.test.ts (random bodies) and test/compaction/plan.property.test.ts
 * (the planner alone): mutated real error bodies, the compaction entry point end to end, the
 * body reader, the request reader and the path guard.
 */

describe('the classifier on mutated real provider errors', () => {
  const mutation = fc.record({
    fixture: fc.constantFrom(...fixtures),
    cut: fc.nat(),
    flips: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 8 }),
    repeat: fc.integer({ min: 1, max: 3 }),
    wrap: fc.constantFrom('', 'data: ', '{"error":', '[', 'event: error\ndata: '),
  });

  it('never throws and always gives a well-formed verdict', () => {
    fc.assert(
      fc.property(mutation, fc.constantFrom(200, 400, 413, 422, 429, 500, 503), ({ fixture, cut, flips, repeat, wrap }, status) => {
        const bytes = Buffer.from(wrap + fixture.body.repeat(repeat));
        for (const [at, value] of flips) if (bytes.length > 0) bytes[at % bytes.length] = value;
        const body = bytes.subarray(0, bytes.length === 0 ? 0 : cut % (bytes.length + 1)).toString('utf8');
        for (const verdict of [classifyResponse({ status, contentType: fixture.content_type, body }), classifyStreamEvent(body)]) {
          expect(typeof verdict.rule).toBe('string');
          if (verdict.overlong) expect(['context_length', 'body_too_large']).toContain(verdict.reason);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('decodes any bytes under any content-encoding without throwing', () => {
    const encoded = fc.oneof(
      fc.uint8Array({ maxLength: 2000 }).map((b) => Buffer.from(b)),
      fc.string().map((s) => gzipSync(s)),
      fc.string().map((s) => deflateSync(s)),
      fc.string().map((s) => brotliCompressSync(s)),
    );
    const truncated = fc.tuple(encoded, fc.nat()).map(([b, n]) => b.subarray(0, n % (b.length + 1)));
    const encoding = fc.constantFrom(undefined, 'gzip', 'x-gzip', 'deflate', 'br', 'zstd', 'identity', 'GZIP', ' br ', ['gzip'], 'bogus');
    fc.assert(
      fc.property(truncated, encoding, (bytes, enc) => {
        expect(typeof decodeText(bytes, enc)).toBe('string');
      }),
      { numRuns: 1500 },
    );
  });
});

describe('compaction end to end (deterministic fallback, no network)', () => {
  const config = validateConfig({ compaction: { strategy: 'fallback' } });
  const request = fc.record({
    messages: conversationArb,
    extra: fc.dictionary(fc.constantFrom('temperature', 'tools', 'max_tokens', 'stream', 'user'), fc.jsonValue(), { maxKeys: 3 }),
    shrinkTo: fc.double({ min: 0.05, max: 0.95, noNaN: true }),
    reason: fc.constantFrom('context_length' as const, 'body_too_large' as const),
  });

  it('a compacted body is valid, smaller than the original and within the target; otherwise it says why', async () => {
    const outcomes = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(request, async ({ messages, extra, shrinkTo, reason }) => {
        const json = deepFreeze({ model: 'm', ...extra, messages });
        const body = Buffer.from(JSON.stringify(json));
        const limitTokens = Math.max(1, Math.floor((body.length * shrinkTo) / 4));
        const limits =
          reason === 'context_length'
            ? { limitTokens, promptTokens: Math.ceil(body.length / 4) }
            : { limitBytes: Math.floor(body.length * shrinkTo) };
        const target = sizeTarget({ reason, limits, bodyBytes: body.length, requested: chat.completion(json) }, undefined, 0.6);
        const conversation = chat.read(json);
        if (!conversation) return;
        const result = await compact(
          { dialect: chat, request: json, conversation, bodyBytes: body.length },
          { target, because: 'a test', compaction: config.compaction, summary: config.summarizer, deadline: new AbortController().signal },
          // The fallback asks no summarizer.
          { wire: chat.summarizer, model: 'm', send: () => Promise.reject(new Error('the fallback asks no summarizer')) },
        );
        outcomes.set(
          result.outcome === 'compacted' ? 'compacted' : result.why,
          (outcomes.get(result.outcome === 'compacted' ? 'compacted' : result.why) ?? 0) + 1,
        );
        if (result.outcome !== 'compacted') return;
        const replay = JSON.parse(result.body.toString('utf8'));
        expect(result.body.length).toBeLessThan(body.length);
        expect(result.body.length).toBeLessThan(target.fitBytes);
        expect(validateCompaction(chat, messages, replay.messages)).toEqual([]);
        expect(jsonBytes(replay.messages)).toBeLessThan(jsonBytes(messages));
        // What the client sent is the JSON text, not the object: -0 in fc.jsonValue() goes out as 0.
        const { messages: _a, ...before } = JSON.parse(body.toString('utf8'));
        const { messages: _b, ...after } = replay;
        expect(after).toEqual(before);
      }),
      { numRuns: 300 },
    );
    // The generator must reach both sides, or the property says little.
    expect(outcomes.get('compacted') ?? 0).toBeGreaterThan(30);
  });
});

describe('holdBody', () => {
  it('holds a prefix up to the limit, and the rest can still be read: nothing lost, nothing doubled', async () => {
    const chunks = fc.array(fc.uint8Array({ minLength: 1, maxLength: 300 }), { maxLength: 30 });
    await fc.assert(
      fc.asyncProperty(chunks, fc.integer({ min: 1, max: 5000 }), async (arrays, limit) => {
        const all = Buffer.concat(arrays.map((a) => Buffer.from(a)));
        const stream = Readable.from(
          arrays.map((a) => Buffer.from(a)),
          { objectMode: false },
        );
        const held = await holdBody(stream, limit);
        expect(held.complete).toBe(all.length < limit);
        const rest: Buffer[] = [];
        if (!held.complete) for await (const chunk of stream) rest.push(chunk as Buffer);
        expect(Buffer.concat([held.bytes, ...rest]).equals(all)).toBe(true);
        if (!held.complete) expect(held.bytes.length).toBeGreaterThanOrEqual(limit);
      }),
      { numRuns: 400 },
    );
  });

  it('a failing body rejects with the gateway error, cause kept', async () => {
    const failing = new Readable({ read() {} });
    const pending = holdBody(failing, 1000);
    failing.push(Buffer.from('{"error":'));
    failing.destroy(Object.assign(new Error('Body Timeout Error'), { code: 'UND_ERR_BODY_TIMEOUT' }));
    const err = await pending.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toMatchObject({ code: 'upstream_timeout', status: 504, cause: { code: 'UND_ERR_BODY_TIMEOUT' } });
  });
});

describe('firstChunk', () => {
  it('is complete only when it holds the whole body: by its end, or by a Content-Length it fills; the rest can still be read', async () => {
    const chunks = fc.array(fc.uint8Array({ minLength: 1, maxLength: 300 }), { minLength: 1, maxLength: 12 });
    await fc.assert(
      fc.asyncProperty(chunks, fc.nat(), fc.constantFrom('exact', 'none', 'other'), async (arrays, at, declared) => {
        const parts = arrays.map((a) => Buffer.from(a));
        const all = Buffer.concat(parts);
        // The first `arrived` chunks came with the headers; the rest arrive after the first is taken.
        const arrived = 1 + (at % parts.length);
        const stream = new Readable({ read() {} });
        for (const part of parts.slice(0, arrived)) stream.push(part);
        const length = declared === 'exact' ? all.length : declared === 'other' ? all.length + 1 : undefined;
        const held = await firstChunk(stream, length);
        for (const part of parts.slice(arrived)) stream.push(part);
        stream.push(null);
        if (held.complete) expect(held.bytes.equals(all)).toBe(true);
        // The whole body taken at once, its length declared: complete before the stream's end was read.
        // (What one read() takes of several buffered chunks is Node's: all of them on Node 20, the first on 26.)
        if (held.bytes.length === all.length && declared === 'exact') expect(held.complete).toBe(true);
        const rest: Buffer[] = [];
        if (!held.complete) for await (const chunk of stream) rest.push(chunk as Buffer);
        expect(Buffer.concat([held.bytes, ...rest]).equals(all)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe('readIncoming on any bytes', () => {
  const bodies = fc.oneof(
    fc.uint8Array({ maxLength: 500 }).map((b) => Buffer.from(b)),
    fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? 'null')),
    fc.record({ model: fc.string(), messages: fc.jsonValue(), stream: fc.jsonValue() }).map((v) => Buffer.from(JSON.stringify(v))),
    fc.string({ unit: 'binary' }).map((s) => Buffer.from(s)),
  );
  const encodings = fc.constantFrom(undefined, 'identity', 'gzip', 'deflate', 'br', 'gzip, br', 'x-unknown', '');

  it('never throws: a body it cannot read is simply not compactable', () => {
    fc.assert(
      fc.property(bodies, encodings, fc.boolean(), (raw, encoding, encode) => {
        let body = raw;
        if (encode && encoding === 'gzip') body = gzipSync(raw);
        if (encode && encoding === 'br') body = brotliCompressSync(raw);
        if (encode && encoding === 'deflate') body = deflateSync(raw);
        const incoming = readIncoming(body, encoding, 64 * 1024);
        expect(incoming.raw).toBe(body);
        const json = incoming.json;
        if (json !== null) expect(typeof json === 'object' && !Array.isArray(json)).toBe(true);
        expect(incoming.bytes).toBeLessThanOrEqual(64 * 1024 + body.length);
      }),
      { numRuns: 3000 },
    );
  });
});

describe('the passthrough path guard', () => {
  const BASE = '/openai/v1';
  const piece = fc.constantFrom(
    '..',
    '.',
    '%2e',
    '%2E',
    '%2e%2e',
    '%2f',
    '%5c',
    '\\',
    '%00',
    '%25',
    '%252e',
    'models',
    'a',
    '',
    ';',
    '%3b',
    '%c0%ae',
    '%u002e',
    '%%',
    '%',
  );
  const path = fc
    .array(fc.tuple(piece, fc.constantFrom('/', '')), { maxLength: 8 })
    .map((parts) => `/${parts.map(([p, s]) => p + s).join('')}`);

  it('whatever it lets through stays under the base path once a server decodes and resolves it', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          path,
          fc.string().map((s) => `/${s}`),
        ),
        (rest) => {
          try {
            assertPassthroughPath(`/v1${rest}`);
          } catch (err) {
            expect(err).toBeInstanceOf(GatewayError);
            return;
          }
          const decoded = decodeURIComponent(rest);
          const resolved = new URL(`${BASE}${decoded}`.replace(/[?#]/g, '_'), 'http://upstream').pathname;
          expect(resolved.startsWith(`${BASE}/`) || resolved === BASE, `${rest} -> ${resolved}`).toBe(true);
        },
      ),
      { numRuns: 5000 },
    );
  });
});
