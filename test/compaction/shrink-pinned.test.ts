import { describe, expect, it } from 'vitest';
import { cutMarker, cutText, formatSize, shrinkKept, textFloor } from '../../src/compaction/shrink.js';
import { jsonBytes } from '../../src/compaction/size.js';
import { chat } from '../../src/dialects/chat.js';
import { messages } from '../../src/dialects/messages.js';
import { result, say, user } from './conversations.js';

/*
 * The last resort with literal results: the exact text a cut leaves (how much of each end, the
 * marker the model reads), the placeholder an image becomes, and what is left alone.
 */

const escaped = (text: string): number => jsonBytes(text) - 2;

describe('the words a reader sees', () => {
  it('sizes in decimal units, switching at 1,000 and 1,000,000 bytes', () => {
    expect([999, 1_000, 999_949, 1_000_000, 25_300_000].map(formatSize)).toEqual(['999 bytes', '1.0 KB', '999.9 KB', '1.0 MB', '25.3 MB']);
  });

  it('the cut marker, with the count of characters cut', () => {
    expect(cutMarker(1_234_567)).toBe('\n[... 1,234,567 characters cut by compaction-gateway ...]\n');
    expect(cutMarker(12)).toBe('\n[... 12 characters cut by compaction-gateway ...]\n');
  });

  it('an inline image becomes a text saying what was there and how big it was', () => {
    const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'A'.repeat(5_000) } };
    const item = { role: 'user', content: [{ type: 'text', text: 'see' }, image] };
    const out = shrinkKept([item, say('ok')], messages, 1);
    expect(out.items[0]).toEqual({ role: 'user', content: [{ type: 'text', text: 'see' }, { type: 'text', text: '[image omitted by compaction-gateway: 5.1 KB]' }] });
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
    expect(cutText(rockets, 1_056)).toBe(`${'a'.repeat(400)}\n[... 2,300 characters cut by compaction-gateway ...]\n${'\u{1F680}'.repeat(150)}`);
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
    const item = { role: 'user', content: [{ type: 'text', text: 'a'.repeat(5_000) }, { type: 'text', text: 'b'.repeat(5_000) }] };
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
