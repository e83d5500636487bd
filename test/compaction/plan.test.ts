import { describe, expect, it } from 'vitest';
import { headEnd, openingEnd, unitsOf } from '../../src/compaction/conversation.js';
import { planCompaction } from '../../src/compaction/plan.js';
import { itemsBytes, jsonBytes } from '../../src/compaction/size.js';
import { validateCompaction } from '../../src/compaction/validate.js';
import { chat } from '../../src/dialects/chat.js';
import { responses } from '../../src/dialects/responses.js';
import {
  calls,
  deepFreeze,
  imagePart,
  rCall,
  rOutput,
  rReasoning,
  rSay,
  rSystem,
  rUser,
  result,
  say,
  system,
  user,
} from './conversations.js';
import { assemble, failureOf, inputOf, planOf, summaryOf } from './planning.js';

const big = (chars: number, unit = 'x'): string => unit.repeat(Math.ceil(chars / unit.length)).slice(0, chars);

describe('the shape of a conversation', () => {
  it('head: the leading system and developer messages; opening: the task, up to the model\u2019s first turn', () => {
    const messages = [system('a'), { role: 'developer', content: 'b' }, system('c'), user('task'), user('more'), say('x'), user('y')];
    const entries = messages.map(chat.describe);
    expect(headEnd(entries)).toBe(3);
    expect(openingEnd(entries)).toBe(5);
  });

  it('the opening never takes the last item, so something is always left to plan', () => {
    const entries = [system('s'), user('only')].map(chat.describe);
    expect(openingEnd(entries)).toBe(1);
  });

  it('later system messages are ordinary items, condensed like the rest', () => {
    const messages = [system('a'), user('task'), say('x'), system(big(500)), say('y'), say('z'), say('w')];
    const p = planOf(chat, messages, { keepRecent: 2 });
    expect(p.input.keepFirst).toBe(2);
    expect(p.middle).toContain(3);
  });

  it('units: a tool call with all its results; a reasoning item with the item after it', () => {
    const messages = [system('s'), user('t'), calls('a', 'b'), result('a'), result('b'), say('ok'), user('u')];
    expect(unitsOf(messages.map(chat.describe), 2)).toEqual([
      [2, 5],
      [5, 6],
      [6, 7],
    ]);
    const items = [
      rSystem('s'),
      rUser('t'),
      rReasoning('1'),
      rCall('a'),
      rCall('b'),
      rOutput('a'),
      rOutput('b'),
      rReasoning('2'),
      rSay('ok'),
    ];
    expect(unitsOf(items.map(responses.describe), 2)).toEqual([
      [2, 7],
      [7, 9],
    ]);
  });
});

describe('tail boundary', () => {
  const messages = [system('s'), user('task'), say(big(500)), calls('c1', 'c2'), result('c1'), result('c2'), say('done'), user('next')];

  it('never splits a unit: one that would pass keepRecent is condensed whole (it used to widen the tail instead)', () => {
    const p = planOf(chat, messages, { keepRecent: 4 });
    expect(p.tailStart).toBe(6);
    expect(p.middle).toEqual([2, 3, 4, 5]);
    expect(p.kept).toEqual([messages[6], messages[7]]);
  });

  it('takes the whole unit when keepRecent reaches its start', () => {
    const p = planOf(chat, messages, { keepRecent: 5 });
    expect(p.tailStart).toBe(3);
    expect(p.middle).toEqual([2]);
    expect(p.kept[0]).toBe(messages[3]);
  });

  it('is exactly keepRecent when that falls on a unit boundary', () => {
    expect(planOf(chat, messages, { keepRecent: 2 }).kept).toEqual([messages[6], messages[7]]);
  });

  it('always keeps the newest unit, even with keepRecent 0 or a unit longer than keepRecent', () => {
    const tools = [system('s'), user('task'), say(big(2000)), calls('a', 'b', 'c'), result('a'), result('b'), result('c')];
    const p = planOf(chat, tools, { keepRecent: 0 });
    expect(p.tailStart).toBe(3);
    expect(p.kept).toEqual(tools.slice(3));
    expect(p.middle).toEqual([2]);
  });

  it('keeps the task before the summary and condenses nothing when keepRecent covers everything', () => {
    const withBigOutput = [system('s'), user('task'), calls('c1'), result('c1', big(50_000))];
    const p = planOf(chat, withBigOutput, { keepRecent: 100, targetBytes: 20_000 });
    expect(p.input.keepFirst).toBe(2);
    expect(p.middle).toEqual([]);
    expect(p.kept).toHaveLength(2);
    expect(p.cut).toBe(1);
  });
});

describe('the last user input', () => {
  it('is kept before the summary when it is the opening task (it used to be pinned after the summary)', () => {
    const task = user([{ type: 'text', text: 'Fix the bug' }, imagePart(3000)], { name: 'alice' });
    const messages = [system('s'), task, calls('a'), result('a'), calls('b'), result('b'), calls('c'), result('c')];
    const p = planOf(chat, messages, { keepRecent: 2 });
    expect(p.pinned).toEqual([]);
    expect(p.middle).toEqual([2, 3, 4, 5]);
    const compacted = assemble(p.input, p, summaryOf(chat, 100));
    expect(compacted.indexOf(task)).toBe(1);
    expect(compacted[2]).toEqual(summaryOf(chat, 100));
    expect(validateCompaction(chat, messages, compacted)).toEqual([]);
  });

  it('is pinned after the summary when it is a later follow-up older than the tail', () => {
    const follow = user('also check the docs', { name: 'alice' });
    const messages = [system('s'), user('task'), calls('a'), result('a'), follow, calls('b'), result('b'), calls('c'), result('c')];
    const p = planOf(chat, messages, { keepRecent: 2 });
    expect(p.pinned).toEqual([4]);
    expect(p.middle).toEqual([2, 3, 5, 6]);
    const summary = summaryOf(chat, 100);
    expect(assemble(p.input, p, summary)).toEqual([messages[0], messages[1], summary, follow, messages[7], messages[8]]);
  });

  it('is not pinned when it is already in the tail', () => {
    const messages = [system('s'), user('old'), say(big(500)), say('b'), user('new'), say('c')];
    const p = planOf(chat, messages, { keepRecent: 2 });
    expect(p.pinned).toEqual([]);
    expect(p.kept).toEqual([messages[4], messages[5]]);
  });
});

describe('kept items', () => {
  it('keep parts arrays, null content with tool_calls, names and unknown fields, by reference', () => {
    const asking = { ...calls('k1'), reasoning_content: 'thinking', x_vendor: { a: 1 } };
    const answer = { ...result('k1', [{ type: 'text', text: 'file body' }]), name: 'read_file', x_latency_ms: 12 };
    const question = user([{ type: 'text', text: 'and now?' }], { name: 'bob', x_client: true });
    const messages = [system('s'), user('task'), say(big(5000)), asking, answer, question];
    const p = planOf(chat, messages, { keepRecent: 3 });
    expect(p.kept[0]).toBe(asking);
    expect(p.kept[1]).toBe(answer);
    expect(p.kept[2]).toBe(question);
    expect(assemble(p.input, p, null)).toEqual([messages[0], messages[1], asking, answer, question]);
  });
});

describe('rule: nothing new is cut while something old can be condensed', () => {
  it('chat: the newest tool result stays whole; the older unit is condensed instead', () => {
    const messages = [system('s'), user('task'), calls('a'), result('a', big(30_000, 'a')), calls('b'), result('b', big(30_000, 'b'))];
    const p = planOf(chat, messages, { keepRecent: 10, targetBytes: 45_000 });
    expect(p.tailStart).toBe(4);
    expect(p.middle).toEqual([2, 3]);
    expect(p.cut).toBe(0);
    expect(p.kept).toEqual([messages[4], messages[5]]);
    expect(p.kept[1]).toBe(messages[5]);
  });

  it('responses: the same, with the newest function_call_output', () => {
    const items = [
      rSystem('s'),
      rUser('task'),
      rCall('a'),
      rOutput('a', big(30_000, 'a')),
      rReasoning('b'),
      rCall('b'),
      rOutput('b', big(30_000, 'b')),
    ];
    const p = planOf(responses, items, { keepRecent: 10, targetBytes: 45_000 });
    expect(p.tailStart).toBe(4);
    expect(p.cut).toBe(0);
    expect(p.kept).toEqual(items.slice(4));
    expect(p.kept[2]).toBe(items[6]);
  });

  it('condenses the older units first even when keepRecent would keep them', () => {
    const messages = [
      system('s'),
      user('task'),
      say(big(20_000)),
      calls('a'),
      result('a', big(20_000)),
      say('ok'),
      calls('b'),
      result('b', big(20_000)),
    ];
    const p = planOf(chat, messages, { keepRecent: 10, targetBytes: 50_000 });
    expect(p.cut).toBe(0);
    expect(p.middle).toEqual([2]);
    expect(p.tailStart).toBe(3);
  });
});

describe('rule: cuts are the last resort, oldest kept content first', () => {
  it('cuts the oldest result of the newest unit and leaves the newest whole when that is enough', () => {
    const messages = [
      system('s'),
      user('task'),
      say(big(5000)),
      calls('a', 'b', 'c'),
      result('a', big(20_000, 'a')),
      result('b', big(20_000, 'b')),
      result('c', big(20_000, 'c')),
    ];
    const p = planOf(chat, messages, { keepRecent: 10, targetBytes: 30_000 });
    expect(p.tailStart).toBe(3);
    expect(p.cut).toBe(2);
    expect((p.kept[1] as { content: string }).content.length).toBeLessThan(1000); // a: to its floor
    expect((p.kept[2] as { content: string }).content.length).toBeLessThan(20_000); // b: as much as still needed
    expect(p.kept[3]).toBe(messages[6]); // c: the newest, whole
    const compacted = assemble(p.input, p, summaryOf(chat, 100));
    expect(jsonBytes(compacted)).toBeLessThanOrEqual(30_000);
  });

  it('never cuts the last user input, even when it is the oldest kept item', () => {
    const messages = [
      system('s'),
      user('task'),
      say('x'),
      user(big(30_000, 'u')),
      calls('c1', 'c2'),
      result('c1', big(30_000, 'o')),
      result('c2', big(30_000, 'n')),
    ];
    const p = planOf(chat, messages, { keepRecent: 10, targetBytes: 80_000 });
    expect(p.pinned).toEqual([3]);
    expect(p.cut).toBe(1);
    expect(p.kept[0]).toBe(messages[3]);
    expect(p.kept[2]).not.toBe(messages[5]);
    expect(p.kept[3]).toBe(messages[6]);
  });

  it('replaces images before it cuts texts, and the last item only when nothing older is left', () => {
    const last = user([{ type: 'text', text: 'what do you see?' }, imagePart(50_000)]);
    const shot = { ...result('c1', [{ type: 'text', text: 'screenshot:' }, imagePart(200_000)]), name: 'screenshot' };
    const messages = [system('s'), user('task'), say(big(2000)), last, calls('c1'), shot];
    const p = planOf(chat, messages, { keepRecent: 3, targetBytes: 100_000 });
    expect(p.cut).toBe(1);
    expect(p.kept[0]).toBe(last);
    expect(p.kept[2]).toEqual({
      ...shot,
      content: [
        { type: 'text', text: 'screenshot:' },
        { type: 'text', text: '[image omitted by compaction-gateway: 200.1 KB]' },
      ],
    });
    expect(jsonBytes(assemble(p.input, p, summaryOf(chat, 100)))).toBeLessThanOrEqual(100_000);
  });

  it('replaces the other inline image shapes too', () => {
    const anthropic = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: big(30_000, 'Q') } };
    const input = { type: 'input_image', image_url: `data:image/jpeg;base64,${big(30_000, 'Q')}` };
    const messages = [system('s'), user('task'), say('a'), say('b'), { role: 'assistant', content: [anthropic, input] }];
    const p = planOf(chat, messages, { keepRecent: 1, targetBytes: 5_000 });
    expect(p.cut).toBe(2);
    expect(JSON.stringify(p.kept)).not.toContain('QQQQ');
  });

  it('cuts one 5 MB newest tool output so that the result fits, keeping both ends', () => {
    const output = `BEGIN ${big(5_000_000, 'log line\n')}END`;
    const messages = [system('s'), user('task'), calls('c0'), result('c0'), calls('c1'), result('c1', output)];
    const p = planOf(chat, messages, { keepRecent: 3, targetBytes: 200_000, summaryReserveBytes: 4000 });
    expect(p.cut).toBe(1);
    const cut = (p.kept[1] as { content: string }).content;
    expect(cut.startsWith(output.slice(0, 1000))).toBe(true);
    expect(cut.endsWith(output.slice(-1000))).toBe(true);
    expect(cut).toMatch(/\n\[\.\.\. [\d,]+ characters cut by compaction-gateway \.\.\.\]\n/);
    const compacted = assemble(p.input, p, summaryOf(chat, 4000));
    expect(jsonBytes(compacted)).toBeLessThanOrEqual(200_000);
    expect(jsonBytes(compacted)).toBeGreaterThan(190_000); // cut only as much as needed
    expect(validateCompaction(chat, messages, compacted)).toEqual([]);
  });

  it('cuts a text part inside a parts array, keeping its other fields', () => {
    const messages = [system('s'), user('task'), calls('c'), result('c', [{ type: 'text', text: big(40_000), extra: 1 }])];
    const p = planOf(chat, messages, { keepRecent: 10, targetBytes: 10_000, summaryReserveBytes: 1e9 });
    const part = (p.kept[1] as { content: Record<string, unknown>[] }).content[0];
    expect(part.extra).toBe(1);
    expect((part.text as string).length).toBeLessThan(10_000);
  });

  it('counts the summary reserve only when there is a middle to summarise', () => {
    const messages = [system('s'), user('task'), calls('c'), result('c', big(100_000))];
    const p = planOf(chat, messages, { keepRecent: 10, targetBytes: 50_000, summaryReserveBytes: 1e9 });
    expect(p.middle).toEqual([]);
    expect(jsonBytes(assemble(p.input, p, null))).toBeLessThanOrEqual(50_000);
  });
});

describe('rule: units are never split', () => {
  // r1 fc_a fc_b out_a out_b | say | user | r2 fc_c out_c
  const items = [
    rSystem('s'),
    rUser('task'),
    rReasoning('1'),
    rCall('a'),
    rCall('b'),
    rOutput('a', big(3000)),
    rOutput('b', big(3000)),
    rSay('found it'),
    rUser('now fix it'),
    rReasoning('2'),
    rCall('c'),
    rOutput('c', big(3000)),
  ];

  it('a reasoning item stays with the call after it, even when keepRecent is smaller than the unit', () => {
    for (const keepRecent of [1, 2, 3]) {
      const p = planOf(responses, items, { keepRecent });
      expect(p.tailStart).toBe(9);
      expect(p.pinned).toEqual([8]);
      expect(p.kept).toEqual([items[8], ...items.slice(9)]);
      expect(p.middle).toEqual([2, 3, 4, 5, 6, 7]);
    }
  });

  it('parallel calls and all their outputs are kept together, or condensed together', () => {
    const newest = items.slice(0, 7);
    const kept = planOf(responses, [...newest.slice(0, 2), rSay(big(5000)), ...newest.slice(2)], { keepRecent: 2 });
    expect(kept.tailStart).toBe(3);
    expect(kept.kept).toHaveLength(5);
    const condensed = planOf(responses, items, { keepRecent: 4 });
    expect(condensed.middle.filter((i) => i >= 2 && i <= 6)).toEqual([2, 3, 4, 5, 6]);
  });

  it('chat: a tail of keepRecent 2 keeps an assistant message with three calls and all three results', () => {
    const messages = [system('s'), user('task'), say(big(5000)), calls('a', 'b', 'c'), result('a'), result('b'), result('c')];
    const p = planOf(chat, messages, { keepRecent: 2 });
    expect(p.tailStart).toBe(3);
    expect(p.kept).toEqual(messages.slice(3));
    expect(validateCompaction(chat, messages, assemble(p.input, p, summaryOf(chat, 100)))).toEqual([]);
  });
});

describe('failures', () => {
  it('cannot_fit when the last user message alone is over the target', () => {
    const messages = [system('s'), user('task'), say(big(10_000)), calls('c'), result('c'), user(big(60_000))];
    expect(failureOf(chat, messages, { keepRecent: 1, targetBytes: 50_000 })).toBe('cannot_fit');
  });

  it('cannot_fit when the head alone is over the target', () => {
    const messages = [system(big(60_000)), user('task'), say(big(10_000)), say('b'), say('c')];
    expect(failureOf(chat, messages, { keepRecent: 1, targetBytes: 50_000 })).toBe('cannot_fit');
  });

  it('nothing_to_shrink for a system prompt and one user message that are too big', () => {
    expect(failureOf(chat, [system('s'), user(big(60_000))], { targetBytes: 50_000 })).toBe('nothing_to_shrink');
  });

  it('nothing_to_shrink when nothing is in the middle and the items already fit', () => {
    expect(failureOf(chat, [system('s'), user('task'), say('a')], { keepRecent: 10, targetBytes: 1000 })).toBe('nothing_to_shrink');
    expect(failureOf(chat, [], { targetBytes: 1000 })).toBe('nothing_to_shrink');
  });

  it('nothing_to_shrink when the summary would not make the request smaller', () => {
    const messages = [system('s'), user('task'), say('tiny'), say('a'), say('b')];
    expect(failureOf(chat, messages, { keepRecent: 2, summaryReserveBytes: 1000 })).toBe('nothing_to_shrink');
  });
});

describe('purity', () => {
  it('never mutates its input, even when cutting', () => {
    const messages = deepFreeze([
      system('s'),
      user([{ type: 'text', text: 'task' }, imagePart(10_000)]),
      say(big(20_000)),
      calls('c1', 'c2'),
      result('c1', [{ type: 'text', text: big(200_000) }, imagePart(100_000)]),
      result('c2', big(300_000)),
    ]);
    const snapshot = JSON.stringify(messages);
    const p = planOf(chat, messages, { keepRecent: 4, targetBytes: 50_000 });
    expect(p.cut).toBe(3); // c1's image, then c1's text, then (the last item, last) c2's text
    expect(JSON.stringify(messages)).toBe(snapshot);
  });

  it('is deterministic', () => {
    const messages = [system('s'), user('task'), calls('c'), result('c', big(90_000)), say('done')];
    const input = inputOf(chat, messages, { keepRecent: 3, targetBytes: 20_000, summaryReserveBytes: 500 });
    expect(planCompaction(input)).toEqual(planCompaction(input));
  });
});

describe('at the byte edges of aim, target and cut', () => {
  /*
   * The planner's byte arithmetic at its edges: how far the kept tail grows for an aim (a tail that
   * lands exactly on it is kept), which of aim and target binds, how far a cut goes, and when a
   * summary would not make the request smaller. Sizes are the assembled request's, with the summary
   * at its full reserve (what the plan allows for).
   */

  const RESERVE = 100;
  // system, task, then six tool rounds of 1,000-byte results.
  const rounds = deepFreeze([
    system('rules'),
    user('task'),
    ...Array.from({ length: 6 }, (_, i) => [calls(`c${i}`), result(`c${i}`, 'r'.repeat(1_000))]).flat(),
  ]);
  /** The size of the request that keeps the tail from `start` after the summary. */
  const sizeFrom = (start: number) => itemsBytes([rounds[0], rounds[1], summaryOf(chat, RESERVE), ...rounds.slice(start)]);

  describe('the tail grows up to the aim', () => {
    it('a tail that lands exactly on the aim is kept; one byte less and its oldest round is condensed', () => {
      for (const start of [4, 6, 8]) {
        const exact = planOf(chat, rounds, { keepRecent: 100, summaryReserveBytes: RESERVE, aimBytes: sizeFrom(start) });
        expect(exact.tailStart).toBe(start);
        expect(itemsBytes(assemble(exact.input, exact, summaryOf(chat, RESERVE)))).toBe(sizeFrom(start));
        expect(planOf(chat, rounds, { keepRecent: 100, summaryReserveBytes: RESERVE, aimBytes: sizeFrom(start) - 1 }).tailStart).toBe(
          start + 2,
        );
      }
    });

    it('the target binds when it is below the aim, and stands for the aim when there is none', () => {
      const target = sizeFrom(6);
      expect(planOf(chat, rounds, { keepRecent: 100, summaryReserveBytes: RESERVE, targetBytes: target, aimBytes: 1e9 }).tailStart).toBe(6);
      expect(planOf(chat, rounds, { keepRecent: 100, summaryReserveBytes: RESERVE, targetBytes: target }).tailStart).toBe(6);
      expect(planOf(chat, rounds, { keepRecent: 100, summaryReserveBytes: RESERVE, targetBytes: target - 1 }).tailStart).toBe(8);
    });

    it('keepRecent counts items: a round of two that would make it keepRecent + 1 is condensed', () => {
      expect(planOf(chat, rounds, { keepRecent: 4, summaryReserveBytes: RESERVE }).tailStart).toBe(10);
      expect(planOf(chat, rounds, { keepRecent: 5, summaryReserveBytes: RESERVE }).tailStart).toBe(10);
      expect(planOf(chat, rounds, { keepRecent: 6, summaryReserveBytes: RESERVE }).tailStart).toBe(8);
    });
  });

  describe('keepRecent below the newest unit', () => {
    it('the newest unit alone is kept, however long an older unit is', () => {
      // units: a message, five parallel calls with their results, a message, two calls with theirs.
      const items = deepFreeze([
        system('rules'),
        user('task'),
        say('x'),
        calls('a', 'b', 'c', 'd', 'e'),
        ...['a', 'b', 'c', 'd', 'e'].map((id) => result(id)),
        say('y'),
        calls('f', 'g'),
        result('f'),
        result('g'),
      ]);
      const p = planOf(chat, items, { keepRecent: 1, summaryReserveBytes: 10 });
      expect(p.tailStart).toBe(10);
      expect(p.kept).toEqual(items.slice(10));
    });
  });

  describe('the last user input', () => {
    // The follow-up is the last user input, older than the tail: kept after the summary.
    const withFollowUp = deepFreeze([rounds[0], rounds[1], ...rounds.slice(2, 6), user('and the docs'), ...rounds.slice(6)]);
    const size = (start: number) =>
      itemsBytes([rounds[0], rounds[1], summaryOf(chat, RESERVE), withFollowUp[6], ...withFollowUp.slice(start)]);

    it('is counted in the tail\u2019s size while it is pinned', () => {
      const exact = planOf(chat, withFollowUp, { keepRecent: 100, summaryReserveBytes: RESERVE, aimBytes: size(9) });
      expect(exact.pinned).toEqual([6]);
      expect(exact.tailStart).toBe(9);
      expect(itemsBytes(assemble(exact.input, exact, summaryOf(chat, RESERVE)))).toBe(size(9));
      expect(planOf(chat, withFollowUp, { keepRecent: 100, summaryReserveBytes: RESERVE, aimBytes: size(9) - 1 }).tailStart).toBe(11);
    });

    it('costs no summary when it is the only item older than the tail (a huge opening task, not kept before the summary)', () => {
      const items = deepFreeze([system('rules'), user('t'.repeat(40_000)), calls('a'), result('a', 'r'.repeat(60_000))]);
      const p = planOf(chat, items, { keepRecent: 2, summaryReserveBytes: 1_000, targetBytes: 70_000 });
      expect(p.input.keepFirst).toBe(1);
      expect(p).toMatchObject({ middle: [], pinned: [1], tailStart: 2, cut: 1 });
      expect(p.kept[0]).toBe(items[1]);
      // Cut to the target exactly: no room set aside for a summary that will not be there.
      expect(itemsBytes(assemble(p.input, p, null))).toBe(70_000);
    });
  });

  describe('the last user input and the summary\u2019s cost at the tail\u2019s edge', () => {
    // task, a 500-byte assistant message, a short follow-up, a tool round of 1,000 bytes.
    const items = deepFreeze([
      system('rules'),
      user('task'),
      say('s'.repeat(500)),
      user('and now?'),
      calls('a'),
      result('a', 'r'.repeat(1_000)),
    ]);
    const withSummary = itemsBytes([items[0], items[1], summaryOf(chat, RESERVE), ...items.slice(3)]);

    it('is in the tail, not pinned, when the tail reaches back to it', () => {
      const p = planOf(chat, items, { keepRecent: 100, summaryReserveBytes: RESERVE, aimBytes: withSummary });
      expect(p).toMatchObject({ middle: [2], pinned: [], tailStart: 3, cut: 0 });
    });

    it('one byte under: pinned after the summary, and the plan cuts to stay under the target', () => {
      const p = planOf(chat, items, { keepRecent: 100, summaryReserveBytes: RESERVE, targetBytes: withSummary - 1 });
      expect(p).toMatchObject({ middle: [2], pinned: [3], tailStart: 4, cut: 1 });
      expect(p.kept[0]).toBe(items[3]);
      expect(itemsBytes(assemble(p.input, p, summaryOf(chat, RESERVE)))).toBeLessThanOrEqual(withSummary - 1);
    });

    it('a middle of one item other than the input still costs the summary', () => {
      const noFollowUp = deepFreeze([
        system('rules'),
        user('task'),
        say('s'.repeat(500)),
        calls('a'),
        result('a', 'r'.repeat(1_000)),
        calls('b'),
        result('b', 'done'),
      ]);
      const size = itemsBytes([noFollowUp[0], noFollowUp[1], summaryOf(chat, RESERVE), ...noFollowUp.slice(3)]);
      expect(planOf(chat, noFollowUp, { keepRecent: 100, summaryReserveBytes: RESERVE, aimBytes: size }).tailStart).toBe(3);
      expect(planOf(chat, noFollowUp, { keepRecent: 100, summaryReserveBytes: RESERVE, aimBytes: size - 1 }).tailStart).toBe(5);
    });

    it('is counted once in a conversation with no instructions whose huge task is the last input', () => {
      // keptPrefixEnd keeps nothing before the summary: the task is item 0, pinned.
      const bare = deepFreeze([user('t'.repeat(40_000)), calls('a'), result('a', 'r'.repeat(1_000)), calls('b'), result('b', 'done')]);
      const size = itemsBytes([summaryOf(chat, RESERVE), bare[0], ...bare.slice(3)]);
      const p = planOf(chat, bare, { keepRecent: 100, summaryReserveBytes: RESERVE, aimBytes: size });
      expect(p.input.keepFirst).toBe(0);
      expect(p).toMatchObject({ middle: [1, 2], pinned: [0], tailStart: 3 });
      expect(planOf(chat, bare, { keepRecent: 100, summaryReserveBytes: RESERVE, aimBytes: size + 1_000 }).tailStart).toBe(3);
    });
  });

  describe('how far a cut goes', () => {
    const oneBig = deepFreeze([system('rules'), user('task'), say('s'.repeat(2_000)), calls('a'), result('a', 'r'.repeat(50_000))]);

    it('down to the aim, when the kept round is over the target', () => {
      const p = planOf(chat, oneBig, { keepRecent: 2, summaryReserveBytes: RESERVE, targetBytes: 20_000, aimBytes: 10_000 });
      expect(p.cut).toBe(1);
      expect(itemsBytes(assemble(p.input, p, summaryOf(chat, RESERVE)))).toBe(10_000);
      const toTarget = planOf(chat, oneBig, { keepRecent: 2, summaryReserveBytes: RESERVE, targetBytes: 20_000 });
      expect(itemsBytes(assemble(toTarget.input, toTarget, summaryOf(chat, RESERVE)))).toBe(20_000);
    });

    it('not at all when the kept round fits the target exactly, however low the aim', () => {
      const exact = itemsBytes([oneBig[0], oneBig[1], summaryOf(chat, RESERVE), oneBig[3], oneBig[4]]);
      const p = planOf(chat, oneBig, { keepRecent: 2, summaryReserveBytes: RESERVE, targetBytes: exact, aimBytes: 1_000 });
      expect(p.cut).toBe(0);
      expect(p.kept).toEqual([oneBig[3], oneBig[4]]);
      expect(planOf(chat, oneBig, { keepRecent: 2, summaryReserveBytes: RESERVE, targetBytes: exact - 1, aimBytes: 1_000 }).cut).toBe(1);
    });
  });

  describe('a summary that would not make the request smaller', () => {
    // The middle is one assistant message of exactly `bytes` JSON bytes.
    const withMiddleOf = (bytes: number) => {
      const empty = jsonBytes(say(''));
      return deepFreeze([system('rules'), user('task'), say('m'.repeat(bytes - empty)), calls('a'), result('a')]);
    };

    it('a middle the size of the summary is not condensed; one byte more is', () => {
      expect(jsonBytes(withMiddleOf(RESERVE)[2])).toBe(RESERVE);
      expect(failureOf(chat, withMiddleOf(RESERVE), { keepRecent: 2, summaryReserveBytes: RESERVE })).toBe('nothing_to_shrink');
      const p = planOf(chat, withMiddleOf(RESERVE + 1), { keepRecent: 2, summaryReserveBytes: RESERVE });
      expect(p.middle).toEqual([2]);
      expect(itemsBytes(assemble(p.input, p, summaryOf(chat, RESERVE)))).toBe(itemsBytes(withMiddleOf(RESERVE + 1)) - 1);
    });

    it('the empty conversation and one with nothing after the kept prefix', () => {
      expect(planCompaction(inputOf(chat, []))).toEqual({ failure: 'nothing_to_shrink' });
    });
  });
});
