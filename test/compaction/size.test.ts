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
  unit: fc.oneof(fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })),
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
