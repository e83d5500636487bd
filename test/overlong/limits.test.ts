import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent, createClassifier } from '../../src/overlong/classify.js';
import { gatherEvidence, MAX_SCAN_CHARS } from '../../src/overlong/evidence.js';
import { MAX_GENERAL_CHARS, prose, readStatements } from '../../src/overlong/general.js';
import { readQuantities } from '../../src/overlong/quantities.js';

// The bounds that keep a hostile body cheap, pinned at their values: each test sits one step
// inside and one step outside a limit, so moving or removing it fails here (cheaply), not as
// a slow timeout. Wall-clock checks live in timing.test.ts.
const GENERAL = createClassifier([]);
const message = (m: string) => JSON.stringify({ error: { message: m } });

describe('evidence limits', () => {
  it('walks JSON 16 objects deep, not 17', () => {
    const nest = (n: number) => {
      let v: unknown = { code: 'deep_code' };
      for (let i = 0; i < n; i++) v = { a: v };
      return JSON.stringify(v);
    };
    expect(gatherEvidence(nest(16), true).codes).toEqual(['deep_code']);
    expect(gatherEvidence(nest(17), true).codes).toEqual([]);
  });

  it('walks arrays 16 deep too', () => {
    const nest = (n: number) => `${'['.repeat(n)}{"code":"deep_code"}${']'.repeat(n)}`;
    expect(gatherEvidence(nest(16), true).codes).toEqual(['deep_code']);
    expect(gatherEvidence(nest(17), true).codes).toEqual([]);
  });

  it('re-parses JSON nested in message strings 3 levels deep, not 4', () => {
    const wrap = (k: number) => {
      let s = JSON.stringify({ error: { code: 'deep_code', param: 'messages[0].content' } });
      for (let i = 0; i < k; i++) s = JSON.stringify({ error: { message: `Upstream said: ${s}` } });
      return s;
    };
    // Once from the quoted-code scan of the unescaped text, once from parsing it.
    expect(gatherEvidence(wrap(3), true).codes).toEqual(['deep_code', 'deep_code']);
    expect(gatherEvidence(wrap(4), true).codes).toEqual(['deep_code']);
    expect(gatherEvidence(wrap(4), true).paths).toEqual(['messages[0].content']);
  });

  it('visits at most 5000 JSON nodes', () => {
    const array = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ code: `c${i}` })));
    expect(gatherEvidence(array(4999), true).codes).toHaveLength(4999);
    expect(gatherEvidence(array(5001), true).codes).toHaveLength(4999);
    const wide = JSON.stringify({ error: Object.fromEntries(Array.from({ length: 6000 }, (_, i) => [`k${i}`, { code: `c${i}` }])) });
    expect(gatherEvidence(wide, true).codes).toHaveLength(4998);
  });

  it('reads 16 SSE events and 16 NDJSON lines', () => {
    const sse = Array.from({ length: 20 }, (_, i) => `event: error\ndata: {"code":"e${i}"}\n\n`).join('');
    expect(gatherEvidence(sse, false).codes).toEqual(Array.from({ length: 16 }, (_, i) => `e${i}`));
    const ndjson = `${Array.from({ length: 20 }, (_, i) => `{"code":"e${i}"}`).join('\n')}\nnot json`;
    expect(gatherEvidence(ndjson, false).codes).toHaveLength(16);
  });

  it('reads the first 64 KiB of an SSE text', () => {
    const at = (pad: number) => `event: ping\ndata: {}\n\n: ${'x'.repeat(pad)}\n\nevent: error\ndata: {"code":"late"}\n\n`;
    expect(gatherEvidence(at(60 * 1024), false).codes).toEqual(['late']);
    expect(gatherEvidence(at(64 * 1024), false).codes).toEqual([]);
  });

  it('keeps at most 64 KiB of message text, and nothing after it', () => {
    const long = JSON.stringify({ error: { message: 'a'.repeat(MAX_SCAN_CHARS + 10), detail: 'second text' } });
    const text = gatherEvidence(long, true).text;
    expect(text).toHaveLength(MAX_SCAN_CHARS);
    expect(text).not.toContain('second');
    const two = JSON.stringify({ error: { message: 'a'.repeat(100), detail: 'second text' } });
    expect(gatherEvidence(two, true).text).toBe(`${'a'.repeat(100)}\nsecond text`);
  });

  it('does not parse bodies over 2 MiB', () => {
    const body = (pad: number) => `{"error":{"message":"x","pad":"${' '.repeat(pad)}","code":"late_code"}}`;
    expect(gatherEvidence(body(2 * 1024 * 1024 - 100), true).codes).toContain('late_code');
    expect(gatherEvidence(body(2 * 1024 * 1024), true).codes).not.toContain('late_code');
  });

  it('keeps codes up to 100 characters and paths up to 200', () => {
    const code = (n: number) => JSON.stringify({ error: { code: 'c'.repeat(n) } });
    expect(gatherEvidence(code(100), true).codes).toEqual(['c'.repeat(100)]);
    expect(gatherEvidence(code(101), true).codes).toEqual([]);
    expect(gatherEvidence(JSON.stringify({ error: { param: 'p'.repeat(300) } }), true).paths).toEqual(['p'.repeat(200)]);
  });

  it('recognises SSE framing only in the first 4 KiB', () => {
    const framed = (pad: number) => `${'x'.repeat(pad)}\nevent: error\ndata: {"code":"framed"}\n\n`;
    // Framed: the event is parsed once. Unframed: read as text (quoted-code scan, then the embedded JSON).
    expect(gatherEvidence(framed(4000), false).codes).toEqual(['framed']);
    expect(gatherEvidence(framed(5000), false).codes).toEqual(['framed', 'framed']);
  });

  it('reads phrases within the scanned text only', () => {
    const at = (pad: number) => message(`${'a '.repeat(pad / 2)}prompt is too long`);
    expect(classifyResponse({ status: 400, body: at(MAX_SCAN_CHARS - 100) })).toMatchObject({ overlong: true, rule: 'prompt_too_long' });
    expect(classifyResponse({ status: 400, body: at(MAX_SCAN_CHARS) }).overlong).toBe(false);
  });

  it('checks the stream marker on the first 64 KiB of a chunk', () => {
    const chunk = (pad: number) => `${' '.repeat(pad)}{"error":{"message":"prompt is too long"}}`;
    expect(classifyStreamEvent(chunk(MAX_SCAN_CHARS - 100))).toMatchObject({ overlong: true });
    expect(classifyStreamEvent(chunk(MAX_SCAN_CHARS))).toEqual({ overlong: false, rule: 'no_error_marker' });
  });
});

describe('general layer limits', () => {
  it('reads 16 KiB of message text', () => {
    expect(prose('x'.repeat(MAX_GENERAL_CHARS + 50))).toHaveLength(MAX_GENERAL_CHARS);
    const at = (pad: number) => message(`${'a '.repeat(pad / 2)}The prompt is too long.`);
    expect(GENERAL.classifyResponse({ status: 400, body: at(MAX_GENERAL_CHARS - 100) })).toMatchObject({ overlong: true });
    expect(GENERAL.classifyResponse({ status: 400, body: at(MAX_GENERAL_CHARS) }).overlong).toBe(false);
  });

  it('looks at 32 relations', () => {
    const text = (fillers: number) => `${'The temperature is greater than the maximum. '.repeat(fillers)}The prompt is too long.`;
    expect(readStatements(text(31), '').input).toBe('context_length');
    expect(readStatements(text(32), '').input).toBeUndefined();
  });

  it('looks for a subject 80 characters back, and a limit 80 characters ahead', () => {
    const subject = (gap: number) => `The prompt${' '.repeat(gap)}is too long`;
    expect(readStatements(subject(60), '').input).toBe('context_length');
    expect(readStatements(subject(80), '').input).toBeUndefined();
    const object = (gap: number) => `The prompt exceeds${' '.repeat(gap)}the limit`;
    expect(readStatements(object(60), '').input).toBe('context_length');
    expect(readStatements(object(80), '').input).toBeUndefined();
  });

  it('reads 48 stated numbers', () => {
    const text = (fillers: number) => `${'The limit is 9999999 tokens. '.repeat(fillers)}The prompt has 10000 tokens.`;
    expect(readQuantities(text(47)).limits).toEqual({ limitTokens: 9999999, promptTokens: 10000 });
    expect(readQuantities(text(48)).limits).toEqual({ limitTokens: 9999999 });
  });

  it('reads a number with the words 64 characters before it and 48 after it', () => {
    const before = (gap: number) => `maximum context length${' '.repeat(gap)}is 4096`;
    expect(readQuantities(before(20)).limits).toEqual({ limitTokens: 4096 });
    expect(readQuantities(before(40)).limits).toEqual({});
    const after = (gap: number) => `got 5000${' '.repeat(gap)}input tokens`;
    expect(readQuantities(after(30)).limits).toEqual({ promptTokens: 5000 });
    expect(readQuantities(after(48)).limits).toEqual({});
  });

  it('strips tags of up to 200 characters and reads 32 codes', () => {
    expect(prose(`a<${'b'.repeat(198)}>c`)).toBe('a\nc');
    expect(prose(`a<${'b'.repeat(201)}>c`)).toBe(`a<${'b'.repeat(201)}>c`);
    const codes = Array.from({ length: 40 }, (_, i) => (i === 32 ? 'context_length_exceeded' : `code_${i}`));
    const body = JSON.stringify(codes.map((code) => ({ error: { code } })));
    expect(GENERAL.classifyResponse({ status: 400, body }).overlong).toBe(false);
    codes[31] = 'context_length_exceeded';
    const inside = JSON.stringify(codes.map((code) => ({ error: { code } })));
    expect(GENERAL.classifyResponse({ status: 400, body: inside })).toMatchObject({ overlong: true });
  });
});
