import { describe, expect, it } from 'vitest';
import { planCompaction } from '../../src/compaction/plan.js';
import { itemsBytes, jsonBytes } from '../../src/compaction/size.js';
import { chat } from '../../src/dialects/chat.js';
import { calls, deepFreeze, result, say, system, user } from './conversations.js';
import { assemble, failureOf, inputOf, planOf, summaryOf } from './planning.js';

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
      expect(planOf(chat, rounds, { keepRecent: 100, summaryReserveBytes: RESERVE, aimBytes: sizeFrom(start) - 1 }).tailStart).toBe(start + 2);
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
    const items = deepFreeze([system('rules'), user('task'), say('x'), calls('a', 'b', 'c', 'd', 'e'), ...['a', 'b', 'c', 'd', 'e'].map((id) => result(id)), say('y'), calls('f', 'g'), result('f'), result('g')]);
    const p = planOf(chat, items, { keepRecent: 1, summaryReserveBytes: 10 });
    expect(p.tailStart).toBe(10);
    expect(p.kept).toEqual(items.slice(10));
  });
});

describe('the last user input', () => {
  // The follow-up is the last user input, older than the tail: kept after the summary.
  const withFollowUp = deepFreeze([rounds[0], rounds[1], ...rounds.slice(2, 6), user('and the docs'), ...rounds.slice(6)]);
  const size = (start: number) => itemsBytes([rounds[0], rounds[1], summaryOf(chat, RESERVE), withFollowUp[6], ...withFollowUp.slice(start)]);

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
  const items = deepFreeze([system('rules'), user('task'), say('s'.repeat(500)), user('and now?'), calls('a'), result('a', 'r'.repeat(1_000))]);
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
    const noFollowUp = deepFreeze([system('rules'), user('task'), say('s'.repeat(500)), calls('a'), result('a', 'r'.repeat(1_000)), calls('b'), result('b', 'done')]);
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
