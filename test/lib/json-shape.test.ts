import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { scanJson, type JsonShape } from '../../src/lib/json-shape.js';

/*
 * The shape of a body, scanned off its bytes before it is parsed: what the rescue budget's
 * estimate is made of. Every count is checked against the value JSON.parse makes of the same
 * text, whatever the chunks it arrived in.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The counts as the parsed value has them: every object, list, string (keys too), key, and `,`. */
function counted(value: Json): Omit<JsonShape, 'bytes' | 'ascii' | 'items' | 'longestList' | 'largestPiece'> {
  const c = { objects: 0, arrays: 0, strings: 0, keys: 0, commas: 0 };
  const walk = (v: Json): void => {
    if (typeof v === 'string') c.strings++;
    else if (Array.isArray(v)) {
      c.arrays++;
      c.commas += Math.max(0, v.length - 1);
      v.forEach(walk);
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v);
      c.objects++;
      c.keys += entries.length;
      c.strings += entries.length;
      c.commas += Math.max(0, entries.length - 1);
      for (const [, inner] of entries) walk(inner);
    }
  };
  walk(value);
  return c;
}

/** Tokens (strings, `{`, `[`, `,`, `:`) a value is written with. */
function tokens(v: Json): number {
  if (typeof v === 'string') return 1;
  if (Array.isArray(v)) return 1 + Math.max(0, v.length - 1) + v.reduce<number>((n, e) => n + tokens(e), 0);
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v);
    return 1 + Math.max(0, entries.length - 1) + entries.reduce((n, [, e]) => n + 2 + tokens(e), 0);
  }
  return 0;
}

/** The text cut into chunks at the given offsets, as a socket may deliver it. */
function cut(text: string, at: number[]): Buffer[] {
  const bytes = Buffer.from(text);
  const points = [...new Set(at.map((a) => a % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    out.push(bytes.subarray(from, p));
    from = p;
  }
  out.push(bytes.subarray(from));
  return out;
}

/** Strings full of what makes scanning them hard: quotes, backslashes, brackets and multi-byte characters. */
const hardString = fc.string({ unit: fc.constantFrom('"', '\\', '{', '[', ']', '}', ',', ':', 'a', 'é', '→', '😀', '\n') });
const hardJson = fc.letrec<{ value: Json }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    hardString,
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(hardString, tie('value'), { maxKeys: 5 }),
  ),
})).value;
const body = fc.dictionary(hardString, hardJson, { maxKeys: 6 });

describe('scanJson', () => {
  it('counts what JSON.parse makes of the text, whatever chunks it came in, compact or indented', async () => {
    await fc.assert(
      fc.asyncProperty(body, fc.constantFrom('', ' ', '\n\t'), fc.array(fc.nat(), { maxLength: 8 }), async (value, space, at) => {
        const text = JSON.stringify(value, null, space);
        const shape = await scanJson(cut(text, at));
        expect(shape).toMatchObject(counted(value));
        expect(shape.bytes).toBe(Buffer.byteLength(text));
        expect(shape.ascii).toBe(/^[\x00-\x7f]*$/.test(text));
      }),
      { numRuns: 400 },
    );
  });

  it('a string of backslashes and quotes split at every byte: one string, whichever chunk its escapes end in', async () => {
    const text = JSON.stringify({ a: '\\"\\\\"\\\\\\', b: ['\\', '"'] });
    const whole = await scanJson([Buffer.from(text)]);
    expect(whole).toMatchObject({ strings: 5, keys: 2, arrays: 1, objects: 1, commas: 2 });
    for (let i = 0; i <= text.length; i++) {
      for (let j = i; j <= text.length; j++) expect(await scanJson(cut(text, [i, j]))).toEqual(whole);
    }
  });

  it('items: the elements of the top-level lists; the longest list; each piece parsed at once', async () => {
    await fc.assert(
      fc.asyncProperty(body, async (value) => {
        const shape = await scanJson([Buffer.from(JSON.stringify(value))]);
        const lists = Object.values(value).filter((v): v is Json[] => Array.isArray(v));
        // An empty list counts one: the estimate errs high.
        expect(shape.items).toBe(lists.reduce((n, l) => n + Math.max(1, l.length), 0));
        expect(shape.longestList).toBe(Math.max(0, ...lists.map((l) => Math.max(1, l.length))));
        const pieces = Object.values(value).flatMap((v) => (Array.isArray(v) ? v : [v]));
        const largest = Math.max(0, ...pieces.map(tokens));
        // A field's piece also holds its key and colon (the first one the root's brace too).
        expect(shape.largestPiece).toBeGreaterThanOrEqual(largest);
        expect(shape.largestPiece).toBeLessThanOrEqual(largest + 3);
      }),
      { numRuns: 300 },
    );
  });

  it('the shapes that cost the most per byte are counted in full', async () => {
    const wide = `{"model":"m","metadata":{${Array.from({ length: 1000 }, (_, i) => `"k${i}":0`).join(',')}},"messages":[]}`;
    expect(await scanJson([Buffer.from(wide)])).toMatchObject({ keys: 1003, strings: 1004, largestPiece: 3002 });
    const lists = `{"messages":[{"role":"user","content":[${'[],'.repeat(999)}[]]}]}`;
    expect(await scanJson([Buffer.from(lists)])).toMatchObject({ arrays: 1002, items: 1, longestList: 1, largestPiece: 2007 });
  });
});
