import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MIN_KEEP_CHARS,
  cutText,
  cutTexts,
  formatSize,
  isInlineImage,
  replaceImages,
  shrinkTail,
} from '../../src/compaction/shrink.js';
import { jsonBytes } from '../../src/compaction/size.js';
import type { ChatMessage } from '../../src/compaction/types.js';
import { conversationArb, deepFreeze, imagePart, loremText, result, rng, say, user } from './conversations.js';

const escaped = (text: string): number => jsonBytes(text) - 2;

describe('isInlineImage', () => {
  it.each([
    ['OpenAI data URL', imagePart(10), true],
    ['Anthropic base64 source', { type: 'image', source: { type: 'base64', data: 'A'.repeat(2000) } }, true],
    ['Responses input_image', { type: 'input_image', image_url: 'data:image/png;base64,AAAA' }, true],
    ['a short https link', { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }, false],
    ['a text part', { type: 'text', text: 'data:image/png;base64,AAAA' }, false],
    ['not a part', 'data:image/png;base64,AAAA', false],
  ])('%s', (_, part, expected) => {
    expect(isInlineImage(part)).toBe(expected);
  });
});

describe('formatSize', () => {
  it('uses decimal units with one decimal', () => {
    expect([formatSize(812), formatSize(1234), formatSize(1_234_567)]).toEqual(['812 bytes', '1.2 KB', '1.2 MB']);
  });
});

describe('replaceImages', () => {
  it('replaces the largest images first, only as many as needed', () => {
    const tail = [user([imagePart(1000), imagePart(5000)]), user([imagePart(3000)])];
    const out = replaceImages(tail, -1, 4000);
    expect(out.replacedImages).toBe(1);
    expect(out.tail[1]).toBe(tail[1]);
    expect((out.tail[0].content as unknown[])[0]).toBe((tail[0].content as unknown[])[0]);
    expect(out.savedBytes).toBe(jsonBytes(tail) - jsonBytes(out.tail));
  });
});

describe('cutText', () => {
  it('keeps both ends, marks the cut with its size, and fits the target', () => {
    const text = loremText(rng(1), 100_000);
    const out = cutText(text, 10_000);
    expect(escaped(out)).toBeLessThanOrEqual(10_000);
    const marker = /\n\[\.\.\. ([\d,]+) characters cut by compaction-gateway \.\.\.\]\n/.exec(out);
    expect(marker).not.toBeNull();
    const [head, tail] = out.split(marker![0]);
    expect(text.startsWith(head)).toBe(true);
    expect(text.endsWith(tail)).toBe(true);
    expect(head.length + tail.length + Number(marker![1].replaceAll(',', ''))).toBe(text.length);
    expect(head.length).toBeGreaterThan(MIN_KEEP_CHARS);
    expect(tail.length).toBeGreaterThan(MIN_KEEP_CHARS);
  });

  it('fits any target for any text, multi-byte and escapes included', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1e6 }), fc.integer({ min: 700, max: 20_000 }), fc.double({ min: 0, max: 1, noNaN: true }), (seed, chars, where) => {
        const text = loremText(rng(seed), chars);
        const target = Math.round(escaped(text) * where);
        const out = cutText(text, target);
        const floor = escaped(text.slice(0, MIN_KEEP_CHARS) + text.slice(-MIN_KEEP_CHARS)) + 70;
        if (target >= floor) expect(escaped(out)).toBeLessThanOrEqual(target);
      }),
    );
  });
});

describe('cutTexts', () => {
  const long = (chars: number, seed = 1): string => loremText(rng(seed), chars);

  it('levels the cut: one huge output is cut before a medium one loses anything', () => {
    const tail = [result('a', long(100_000)), result('b', long(10_000, 2))];
    const out = cutTexts(tail, -1, 50_000);
    expect(out.shrunkContents).toBe(1);
    expect(out.tail[1]).toBe(tail[1]);
    expect(out.savedBytes).toBeGreaterThanOrEqual(50_000);
    expect(out.savedBytes).toBeLessThan(50_000 + 200);
  });

  it('spreads a large cut over several outputs, bringing them to the same size', () => {
    const tail = [result('a', long(100_000)), result('b', long(80_000, 2))];
    const out = cutTexts(tail, -1, 120_000);
    expect(out.shrunkContents).toBe(2);
    const sizes = out.tail.map((m) => escaped(m.content as string));
    expect(Math.abs(sizes[0] - sizes[1])).toBeLessThan(100);
  });

  it('cuts tool outputs first, then other texts, and skips the protected message', () => {
    const tail = [say(long(50_000)), result('a', long(50_000, 2)), user(long(50_000, 3))];
    const small = cutTexts(tail, 2, 10_000);
    expect(small.tail[0]).toBe(tail[0]);
    expect(small.tail[1]).not.toBe(tail[1]);
    const large = cutTexts(tail, 2, 80_000);
    expect(large.tail[0]).not.toBe(tail[0]);
    expect(large.tail[2]).toBe(tail[2]);
    expect(large.savedBytes).toBeGreaterThanOrEqual(80_000);
  });

  it('leaves texts of a few hundred characters alone', () => {
    const tail = [result('a', long(2 * MIN_KEEP_CHARS))];
    expect(cutTexts(tail, -1, 100).shrunkContents).toBe(0);
  });
});

describe('shrinkTail', () => {
  it('reports exactly the bytes it saved, without touching its input', () => {
    fc.assert(
      fc.property(conversationArb, fc.nat(), fc.double({ min: 0, max: 1, noNaN: true }), (messages, p, fraction) => {
        const tail = deepFreeze(messages.slice(1));
        const protectedIndex = tail.length === 0 ? -1 : p % tail.length;
        const out = shrinkTail(tail, protectedIndex, Math.round(jsonBytes(tail) * fraction));
        expect(jsonBytes(tail) - jsonBytes(out.tail)).toBe(out.savedBytes);
        if (protectedIndex >= 0) expect(out.tail[protectedIndex]).toBe(tail[protectedIndex]);
        expect(out.tail.map((m: ChatMessage) => m.role)).toEqual(tail.map((m) => m.role));
      }),
      { numRuns: 150 },
    );
  });
});
