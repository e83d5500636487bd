import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  arrayBytes,
  jsonBytes,
  itemBytes,
  itemsBytes,
  jsonTextBytes,
  prefixWithinBytes,
  suffixWithinBytes,
} from '../../src/compaction/size.js';
import { agentConversation } from './conversations.js';

/** Any UTF-16 code units, lone surrogates and control characters included, plus whole code points. */
const anyText = fc.string({
  unit: fc.oneof(
    fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  ),
  maxLength: 60,
});

const escaped = (text: string): number => Buffer.byteLength(JSON.stringify(text), 'utf8') - 2;

describe('jsonBytes', () => {
  it('is the UTF-8 length of JSON.stringify', () => {
    expect(jsonBytes({ a: 'é' })).toBe(Buffer.byteLength('{"a":"é"}'));
    expect(jsonBytes('🚀')).toBe(6);
    expect(jsonBytes(null)).toBe(4);
    expect(jsonBytes(undefined)).toBe(0);
  });
});

describe('itemsBytes', () => {
  it('equals the size of the whole array, counted per item', () => {
    const messages = agentConversation({ turns: 20, toolOutputBytes: 500, seed: 3 });
    expect(itemsBytes(messages)).toBe(jsonBytes(messages));
    expect(itemsBytes([])).toBe(2);
    expect(itemsBytes([null, 'é', 3])).toBe(jsonBytes([null, 'é', 3]));
    expect(arrayBytes([5])).toBe(7);
    expect(arrayBytes([5, 6])).toBe(14);
  });
});

describe('itemBytes', () => {
  it('measures an object once: compaction never mutates an item, a changed one is a new object', () => {
    const item = { role: 'tool', content: 'abc' };
    expect(itemBytes(item)).toBe(jsonBytes(item));
    const before = itemBytes(item);
    item.content = 'abcdef'; // what compaction never does: the size stays the one measured first
    expect(itemBytes(item)).toBe(before);
    expect(itemBytes({ ...item })).toBe(jsonBytes(item));
  });
});

describe('escaped text sizes', () => {
  it('jsonTextBytes matches JSON.stringify for any text and any slice', () => {
    fc.assert(
      fc.property(anyText, fc.nat(), fc.nat(), (text, a, b) => {
        const [start, end] = [a % (text.length + 1), b % (text.length + 1)].sort((x, y) => x - y);
        expect(jsonTextBytes(text)).toBe(escaped(text));
        expect(jsonTextBytes(text, start, end)).toBe(escaped(text.slice(start, end)));
      }),
      { seed: 17 },
    );
  });

  it('prefix and suffix are the longest that fit and never split a surrogate pair', () => {
    fc.assert(
      fc.property(anyText, fc.nat({ max: 200 }), (text, max) => {
        const head = prefixWithinBytes(text, max);
        expect(escaped(text.slice(0, head))).toBeLessThanOrEqual(max);
        if (head < text.length) expect(escaped(text.slice(0, head + codePointWidthAt(text, head)))).toBeGreaterThan(max);
        const tail = suffixWithinBytes(text, max);
        expect(escaped(text.slice(text.length - tail))).toBeLessThanOrEqual(max);
        expect(splitsPair(text, head)).toBe(false);
        expect(splitsPair(text, text.length - tail)).toBe(false);
      }),
      { seed: 19 },
    );
  });
});

function codePointWidthAt(text: string, i: number): number {
  const cp = text.codePointAt(i) ?? 0;
  return cp > 0xffff ? 2 : 1;
}

function splitsPair(text: string, at: number): boolean {
  const before = text.charCodeAt(at - 1);
  const after = text.charCodeAt(at);
  return before >= 0xd800 && before <= 0xdbff && after >= 0xdc00 && after <= 0xdfff;
}

describe('byte counts at the edges of each encoding class', () => {
  /*
   * Byte counting at the edges of each encoding class, where random text rarely lands: these sizes
   * decide whether a cut text fits the target it was cut to.
   */

  describe('JSON bytes of one character', () => {
    it.each([
      ['\u0000', 6],
      ['\u0007', 6],
      ['\b', 2],
      ['\t', 2],
      ['\n', 2],
      ['\u000b', 6],
      ['\f', 2],
      ['\r', 2],
      ['\u001f', 6],
      [' ', 1],
      ['"', 2],
      ['\\', 2],
      ['\u007f', 1],
      ['\u0080', 2],
      ['\u07ff', 2],
      ['\u0800', 3],
      ['\ud7ff', 3],
      ['\ud800', 6],
      ['\udbff', 6],
      ['\udc00', 6],
      ['\udfff', 6],
      ['\ue000', 3],
      ['\uffff', 3],
      ['\ud83d\ude80', 4],
      ['\udbff\udfff', 4],
      ['\ud800\udc00', 4],
    ])('%j is %i bytes', (char, bytes) => {
      expect(jsonTextBytes(char)).toBe(bytes);
      expect(Buffer.byteLength(JSON.stringify(char)) - 2).toBe(bytes);
    });
  });

  describe('a surrogate pair at either end', () => {
    it('is kept whole by a suffix that reaches the start of the text, and by a prefix', () => {
      expect(suffixWithinBytes('\ud83d\ude80abc', 7)).toBe(5);
      expect(suffixWithinBytes('\ud83d\ude80abc', 6)).toBe(3);
      expect(suffixWithinBytes('\ud83d\ude80', 4)).toBe(2);
      expect(prefixWithinBytes('abc\ud83d\ude80', 7)).toBe(5);
      expect(prefixWithinBytes('abc\ud83d\ude80', 6)).toBe(3);
    });

    it('a low half alone at the start, or a high half alone at the end, is six bytes', () => {
      expect(suffixWithinBytes('\ude80ab', 8)).toBe(3);
      expect(prefixWithinBytes('ab\ud83d', 8)).toBe(3);
      expect(jsonTextBytes('a\ud83d\ude80b', 1, 2)).toBe(6);
    });
  });

  describe('itemBytes', () => {
    it('measures strings, numbers and null as JSON', () => {
      expect([itemBytes('é'), itemBytes(12), itemBytes(null), itemBytes(undefined)]).toEqual([4, 2, 4, 0]);
    });
  });

  describe('suffixWithinBytes: a lone high surrogate before a plain character', () => {
    it('is not taken as a pair with it: the plain character alone fits in one byte', () => {
      // The high surrogate is escaped (\ud800, 6 bytes) on its own; a pair would be 4 bytes together.
      expect(suffixWithinBytes('\uD800a', 1)).toBe(1);
      expect(suffixWithinBytes('\uD800a', 6)).toBe(1);
      expect(suffixWithinBytes('\uD800a', 7)).toBe(2);
    });
  });

  describe('a budget larger than the whole text', () => {
    // The functions' own contract (today's callers cut only texts over their budget): a step past
    // the end would read NaN, count it as three bytes and give a length beyond the text.
    it('gives the whole text and no more, from either end', () => {
      for (const text of ['', 'abc', 'é\ud83d\ude80"']) {
        expect(prefixWithinBytes(text, 1000)).toBe(text.length);
        expect(suffixWithinBytes(text, 1000)).toBe(text.length);
      }
    });
  });
});
