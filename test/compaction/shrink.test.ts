import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MIN_KEEP_CHARS, cutText, formatSize, setAt, shrinkKept, textFloor } from '../../src/compaction/shrink.js';
import { itemsBytes, jsonBytes } from '../../src/compaction/size.js';
import { chat } from '../../src/dialects/chat.js';
import { responses } from '../../src/dialects/responses.js';
import type { Dialect } from '../../src/dialects/types.js';
import { conversationArb, deepFreeze, imagePart, loremText, rImagePart, rOutput, responsesConversationArb, result, rng, say, user } from './conversations.js';

const escaped = (text: string): number => jsonBytes(text) - 2;
const content = (item: unknown): string => (item as { content: string }).content;

describe('which contents a dialect lets compaction shorten', () => {
  it.each([
    ['OpenAI data URL', imagePart(10), true],
    ['Anthropic base64 source', { type: 'image', source: { type: 'base64', data: 'A'.repeat(2000) } }, true],
    ['Responses input_image', { type: 'input_image', image_url: 'data:image/png;base64,AAAA' }, true],
    ['a short https link', { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }, false],
    ['a text part', { type: 'text', text: 'data:image/png;base64,AAAA' }, false],
  ])('chat, %s as an image', (_, part, expected) => {
    expect(chat.slots(user([part])).some((s) => s.kind === 'image')).toBe(expected);
  });

  it('responses: message texts and images, function_call_output strings and parts; never reasoning or calls', () => {
    expect(responses.slots(rOutput('a', 'text')).map((s) => s.path)).toEqual([['output']]);
    expect(responses.slots(rOutput('a', [{ type: 'input_text', text: 't' }, rImagePart(2000)])).map((s) => s.kind)).toEqual(['text', 'image']);
    expect(responses.slots({ type: 'reasoning', encrypted_content: 'x'.repeat(5000) })).toEqual([]);
    expect(responses.slots({ type: 'function_call', call_id: 'a', arguments: 'x'.repeat(5000) })).toEqual([]);
  });
});

describe('formatSize', () => {
  it('uses decimal units with one decimal', () => {
    expect([formatSize(812), formatSize(1234), formatSize(1_234_567)]).toEqual(['812 bytes', '1.2 KB', '1.2 MB']);
  });
});

describe('setAt', () => {
  it('copies only the objects along the path', () => {
    const item = deepFreeze({ role: 'tool', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }], x: { y: 1 } });
    const out = setAt(item, ['content', 1, 'text'], 'B') as typeof item;
    expect(out.content[1].text).toBe('B');
    expect(out.content[0]).toBe(item.content[0]);
    expect(out.x).toBe(item.x);
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

  it('fits any target at or above the floor for any text, multi-byte and escapes included', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1e6 }), fc.integer({ min: 700, max: 20_000 }), fc.double({ min: 0, max: 1, noNaN: true }), (seed, chars, where) => {
        const text = loremText(rng(seed), chars);
        const target = Math.round(escaped(text) * where);
        const out = cutText(text, target);
        if (target >= textFloor(text)) expect(escaped(out)).toBeLessThanOrEqual(target);
        expect(escaped(cutText(text, textFloor(text)))).toBeLessThanOrEqual(textFloor(text));
      }),
      { seed: 7 },
    );
  });
});

describe('shrinkKept', () => {
  const long = (chars: number, seed = 1): string => loremText(rng(seed), chars);

  it('cuts the oldest content first, and only as much as needed (it used to level the largest first)', () => {
    const kept = [result('a', long(10_000)), result('b', long(100_000, 2)), say('end')];
    const out = shrinkKept(kept, chat, 5_000);
    expect(out.cut).toBe(1);
    expect(out.items[1]).toBe(kept[1]);
    expect(out.savedBytes).toBeGreaterThanOrEqual(5_000);
    expect(out.savedBytes).toBeLessThan(5_000 + 200);
  });

  it('moves to the next item only when the older one is at its floor', () => {
    const kept = [result('a', long(10_000)), result('b', long(100_000, 2)), say('end')];
    const out = shrinkKept(kept, chat, 30_000);
    expect(out.cut).toBe(2);
    expect(escaped(content(out.items[0]))).toBeLessThanOrEqual(textFloor(content(kept[0])));
    expect(content(out.items[1]).length).toBeGreaterThan(50_000);
    expect(out.savedBytes).toBeGreaterThanOrEqual(30_000);
  });

  it('replaces every older image before it cuts a text, and touches the last item last', () => {
    const kept = [user([{ type: 'text', text: long(5000) }]), result('a', [imagePart(20_000)]), result('b', long(50_000, 3))];
    const images = shrinkKept(kept, chat, 10_000);
    expect(images.cut).toBe(1);
    expect(images.items[0]).toBe(kept[0]);
    expect(images.items[2]).toBe(kept[2]);
    const more = shrinkKept(kept, chat, 30_000);
    expect(more.items[0]).not.toBe(kept[0]);
    expect(more.items[2]).not.toBe(kept[2]);
  });

  it('cuts an older text before it replaces the newest item\u2019s image', () => {
    const kept = [result('a', long(50_000)), result('b', [{ type: 'text', text: 'screenshot:' }, imagePart(20_000)])];
    const out = shrinkKept(kept, chat, 10_000);
    expect(out.cut).toBe(1);
    expect(out.items[0]).not.toBe(kept[0]);
    expect(out.items[1]).toBe(kept[1]);
  });

  it('never touches the protected item (the last user input), even when it is the only big one', () => {
    const kept = [user(long(50_000)), result('a', long(50_000, 2))];
    const out = shrinkKept(kept, chat, 80_000, 0);
    expect(out.items[0]).toBe(kept[0]);
    expect(out.cut).toBe(1);
    expect(out.savedBytes).toBeLessThan(80_000);
    expect(shrinkKept([user(long(50_000))], chat, 1000, 0)).toEqual({ items: [expect.anything()], savedBytes: 0, cut: 0 });
  });

  it('leaves texts of a few hundred characters alone', () => {
    expect(shrinkKept([result('a', long(2 * MIN_KEEP_CHARS))], chat, 100).cut).toBe(0);
  });

  it.each<[string, Dialect, fc.Arbitrary<unknown[]>]>([
    ['chat', chat, conversationArb],
    ['responses', responses, responsesConversationArb],
  ])('%s: reports exactly the bytes it saved and the contents it cut, without touching its input', (_, dialect, conversations) => {
    fc.assert(
      fc.property(conversations, fc.nat(), fc.double({ min: 0, max: 1, noNaN: true }), (items, p, fraction) => {
        const kept = deepFreeze(items.slice(1));
        const protectedIndex = kept.length === 0 ? -1 : p % kept.length;
        const out = shrinkKept(kept, dialect, Math.round(itemsBytes(kept) * fraction), protectedIndex);
        expect(jsonBytes(kept) - jsonBytes(out.items)).toBe(out.savedBytes);
        if (protectedIndex >= 0) expect(out.items[protectedIndex]).toBe(kept[protectedIndex]);
        expect(out.items.map((i) => dialect.describe(i))).toEqual(kept.map((i) => dialect.describe(i)));
        expect(out.items.filter((item, i) => item !== kept[i]).length).toBeLessThanOrEqual(out.cut);
      }),
      { numRuns: 100, seed: 11 },
    );
  });
});
