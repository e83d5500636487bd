import { describe, expect, it } from 'vitest';
import { itemBytes, jsonTextBytes, prefixWithinBytes, suffixWithinBytes } from '../../src/compaction/size.js';

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
