import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cutMarker, cutText, formatSize, MIN_KEEP_CHARS, setAt, shrinkKept, textFloor } from '../../src/compaction/shrink.js';
import { itemsBytes, jsonBytes } from '../../src/compaction/size.js';
import { chat } from '../../src/dialects/chat.js';
import { messages } from '../../src/dialects/messages.js';
import { responses } from '../../src/dialects/responses.js';
import type { Dialect } from '../../src/dialects/types.js';
import {
  conversationArb,
  deepFreeze,
  imagePart,
  loremText,
  rImagePart,
  rOutput,
  responsesConversationArb,
  result,
  rng,
  say,
  user,
} from './conversations.js';

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
    expect(responses.slots(rOutput('a', [{ type: 'input_text', text: 't' }, rImagePart(2000)])).map((s) => s.kind)).toEqual([
      'text',
      'image',
    ]);
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
    const item = deepFreeze({
      role: 'tool',
      content: [
        { type: 'text', text: 'a' },
        { type: 'text', text: 'b' },
      ],
      x: { y: 1 },
    });
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
      fc.property(
        fc.integer({ min: 1, max: 1e6 }),
        fc.integer({ min: 700, max: 20_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (seed, chars, where) => {
          const text = loremText(rng(seed), chars);
          const target = Math.round(escaped(text) * where);
          const out = cutText(text, target);
          if (target >= textFloor(text)) expect(escaped(out)).toBeLessThanOrEqual(target);
          expect(escaped(cutText(text, textFloor(text)))).toBeLessThanOrEqual(textFloor(text));
        },
      ),
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

describe('what a cut leaves, in the words the model reads', () => {
  /*
   * The last resort with literal results: the exact text a cut leaves (how much of each end, the
   * marker the model reads), the placeholder an image becomes, and what is left alone.
   */

  describe('the words a reader sees', () => {
    it('sizes in decimal units, switching at 1,000 and 1,000,000 bytes', () => {
      expect([999, 1_000, 999_949, 1_000_000, 25_300_000].map(formatSize)).toEqual([
        '999 bytes',
        '1.0 KB',
        '999.9 KB',
        '1.0 MB',
        '25.3 MB',
      ]);
    });

    it('the cut marker, with the count of characters cut', () => {
      expect(cutMarker(1_234_567)).toBe('\n[... 1,234,567 characters cut by compaction-gateway ...]\n');
      expect(cutMarker(12)).toBe('\n[... 12 characters cut by compaction-gateway ...]\n');
    });

    it('an inline image becomes a text saying what was there and how big it was', () => {
      const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'A'.repeat(5_000) } };
      const item = { role: 'user', content: [{ type: 'text', text: 'see' }, image] };
      const out = shrinkKept([item, say('ok')], messages, 1);
      expect(out.items[0]).toEqual({
        role: 'user',
        content: [
          { type: 'text', text: 'see' },
          { type: 'text', text: '[image omitted by compaction-gateway: 5.1 KB]' },
        ],
      });
      expect(out.savedBytes).toBe(jsonBytes(image) - jsonBytes({ type: 'text', text: '[image omitted by compaction-gateway: 5.1 KB]' }));
      expect(out.cut).toBe(1);
    });
  });

  describe('cutText', () => {
    const text = 'h'.repeat(1_000) + 't'.repeat(1_000);

    it('half of what is left after the marker at each end', () => {
      // 1,000 bytes less a 56-byte marker: 472 characters at each end, 1,056 cut.
      expect(cutText(text, 1_000)).toBe(`${'h'.repeat(472)}\n[... 1,056 characters cut by compaction-gateway ...]\n${'t'.repeat(472)}`);
    });

    it('below the floor: the start first, then what is left for the end', () => {
      expect(cutText(text, 100)).toBe(`${'h'.repeat(44)}\n[... 1,956 characters cut by compaction-gateway ...]\n`);
      // Two-byte characters: 300 at the start take 600 of the 944 bytes, 172 at the end the rest.
      const wide = '"'.repeat(1_000) + 'é'.repeat(1_000);
      const out = cutText(wide, 1_000);
      expect(out).toBe(`${'"'.repeat(300)}\n[... 1,528 characters cut by compaction-gateway ...]\n${'é'.repeat(172)}`);
      expect(escaped(out)).toBe(1_000);
    });

    it('above the floor, an end of wide characters still keeps its 300 code units; the other end gets the rest', () => {
      const rockets = 'a'.repeat(1_000) + '\u{1F680}'.repeat(1_000);
      expect(textFloor(rockets)).toBe(956);
      // 1,000 bytes besides the marker: 600 for the last 150 rockets, 400 for the start.
      expect(cutText(rockets, 1_056)).toBe(
        `${'a'.repeat(400)}\n[... 2,300 characters cut by compaction-gateway ...]\n${'\u{1F680}'.repeat(150)}`,
      );
    });

    it('the floor: 300 characters at each end and the marker', () => {
      expect(textFloor(text)).toBe(656);
      expect(textFloor('é'.repeat(1_000))).toBe(1_256);
    });
  });

  describe('what is left alone', () => {
    it('a text just over 600 characters that would not get smaller by a cut', () => {
      const kept = [result('a', 'x'.repeat(650)), say('end')];
      expect(shrinkKept(kept, chat, 10)).toEqual({ items: kept, savedBytes: 0, cut: 0 });
      // 654 characters escape to exactly their floor (300 + 300 + a 54-byte marker): left alone too.
      expect(textFloor('x'.repeat(654))).toBe(654);
      const atFloor = [result('a', 'x'.repeat(654)), say('end')];
      expect(shrinkKept(atFloor, chat, 10)).toEqual({ items: atFloor, savedBytes: 0, cut: 0 });
      // 700 characters escape to more than the 654-byte floor: cut to what is needed (the marker
      // is sized for the whole length, a cut of 10 characters writes a shorter one: 11 saved).
      const longer = [result('a', 'x'.repeat(700)), say('end')];
      const out = shrinkKept(longer, chat, 10);
      expect(out.cut).toBe(1);
      expect(out.savedBytes).toBe(11);
      expect(escaped((out.items[0] as { content: string }).content)).toBe(689);
    });

    it('an image smaller than its placeholder', () => {
      const tiny = { role: 'user', content: [{ type: 'image', source: { type: 'base64', data: '' } }] };
      expect(shrinkKept([tiny, say('end')], messages, 10)).toEqual({ items: [tiny, say('end')], savedBytes: 0, cut: 0 });
    });

    it('an image exactly the size of its placeholder', () => {
      // 19 characters of data: 72 bytes, like "[image omitted by compaction-gateway: 72 bytes]" in its block.
      const exact = { role: 'user', content: [{ type: 'image', source: { type: 'base64', data: 'A'.repeat(19) } }] };
      expect(shrinkKept([exact, say('end')], messages, 10)).toEqual({ items: [exact, say('end')], savedBytes: 0, cut: 0 });
    });

    it('nothing at all when nothing is over', () => {
      const kept = [result('a', 'x'.repeat(5_000)), say('end')];
      expect(shrinkKept(kept, chat, 0)).toEqual({ items: kept, savedBytes: 0, cut: 0 });
      expect(shrinkKept([], chat, 100)).toEqual({ items: [], savedBytes: 0, cut: 0 });
    });

    it('the second text of an item once the first one saved enough', () => {
      const item = {
        role: 'user',
        content: [
          { type: 'text', text: 'a'.repeat(5_000) },
          { type: 'text', text: 'b'.repeat(5_000) },
        ],
      };
      const out = shrinkKept([item, say('end')], chat, 1_000);
      expect(out.cut).toBe(1);
      expect(out.savedBytes).toBe(1_000);
      const [first, second] = (out.items[0] as { content: Array<{ text: string }> }).content;
      expect(escaped(first.text)).toBe(4_000);
      expect(second).toBe(item.content[1]);
    });

    it('the last item when it is the protected one, however much is over', () => {
      const kept = [say('ok'), user('u'.repeat(50_000))];
      expect(shrinkKept(kept, chat, 10_000, 1)).toEqual({ items: kept, savedBytes: 0, cut: 0 });
      // Not protected: the last item is cut, last.
      const out = shrinkKept(kept, chat, 10_000, 0);
      expect(out.cut).toBe(1);
      expect(out.savedBytes).toBe(10_000);
    });
  });
});
