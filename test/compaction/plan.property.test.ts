import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { lastOfRole, unitsOf } from '../../src/compaction/conversation.js';
import { planCompaction } from '../../src/compaction/plan.js';
import { MIN_KEEP_CHARS, textFloor } from '../../src/compaction/shrink.js';
import { itemsBytes, jsonBytes, jsonTextBytes } from '../../src/compaction/size.js';
import type { Plan, PlanInput } from '../../src/compaction/types.js';
import { validateCompaction } from '../../src/compaction/validate.js';
import { chat } from '../../src/dialects/chat.js';
import { responses } from '../../src/dialects/responses.js';
import type { Dialect, Slot } from '../../src/dialects/types.js';
import { conversationArb, deepFreeze, responsesConversationArb } from './conversations.js';
import { assemble, getAt, inputOf, keptIndices, summaryOf } from './planning.js';

/*
 * The planner's promises on random conversations, for every dialect: the planner must not branch
 * on the API, so the same properties hold for chat messages and Responses items (parallel calls
 * sent as calls-then-outputs, reasoning items that join the next item). Fixed seeds.
 */

const SEED = 20261201;

const dialects: Array<[string, Dialect, fc.Arbitrary<unknown[]>]> = [
  ['chat', chat, conversationArb],
  ['responses', responses, responsesConversationArb],
];

/** Random conversations with random settings; targets between 20% and 100% of the input. */
function caseArb(dialect: Dialect, items: fc.Arbitrary<unknown[]>): fc.Arbitrary<PlanInput> {
  return fc
    .record({
      items,
      keepRecent: fc.integer({ min: 1, max: 10 }),
      fraction: fc.double({ min: 0.2, max: 1, noNaN: true }),
      summaryReserveBytes: fc.integer({ min: 100, max: 3000 }),
    })
    .map(({ items, keepRecent, fraction, summaryReserveBytes }) =>
      inputOf(dialect, deepFreeze(items), { keepRecent, summaryReserveBytes, targetBytes: Math.round(jsonBytes(items) * fraction) }),
    );
}

describe.each(dialects)('planCompaction on random %s conversations', (name, dialect, items) => {
  const cases = caseArb(dialect, items);
  const outcomes = new Map<string, number>();
  const count = (key: string): void => void outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
  afterAll(() => console.log(`${name} plan outcomes:`, Object.fromEntries(outcomes)));

  it('every plan assembles into a valid, smaller request within the target', () => {
    fc.assert(
      fc.property(cases, (input) => {
        const plan = planCompaction(input);
        if ('failure' in plan) return void count(plan.failure);
        count(plan.cut > 0 ? 'plan, cut' : 'plan');
        const compacted = assemble(input, plan, summaryOf(dialect, input.summaryReserveBytes));
        expect(validateCompaction(dialect, input.items, compacted)).toEqual([]);
        expect(itemsBytes(compacted)).toBeLessThanOrEqual(input.targetBytes);
        expect(itemsBytes(compacted)).toBeLessThan(itemsBytes(input.items));
      }),
      { numRuns: 300, seed: SEED },
    );
    expect(outcomes.get('plan') ?? 0).toBeGreaterThan(40);
    expect(outcomes.get('plan, cut') ?? 0).toBeGreaterThan(5);
  });

  it('every plan partitions the items in order, whole units only, keeping uncut items as the same objects', () => {
    fc.assert(
      fc.property(cases, (input) => {
        const plan = planCompaction(input);
        if (!('failure' in plan)) expectPartition(input, plan);
      }),
      { numRuns: 200, seed: SEED },
    );
  });

  it('cuts only when the tail is down to its newest unit, never the last user input, and counts each cut content', () => {
    let cuts = 0;
    fc.assert(
      fc.property(cases, (input) => {
        const plan = planCompaction(input);
        if ('failure' in plan || plan.cut === 0) return;
        cuts++;
        const units = unitsOf(input.entries, input.keepFirst);
        expect(plan.tailStart).toBe(units.at(-1)![0]);
        expectOldestFirst(input, plan);
      }),
      { numRuns: 300, seed: SEED },
    );
    expect(cuts).toBeGreaterThan(5);
  });

  it('a plan that fits a target also fits any larger target below the input size', () => {
    fc.assert(
      fc.property(cases, fc.double({ min: 0, max: 1, noNaN: true }), (input, where) => {
        if ('failure' in planCompaction(input)) return;
        const inputBytes = itemsBytes(input.items);
        const larger = Math.floor(input.targetBytes + (inputBytes - 1 - input.targetBytes) * where);
        expect(planCompaction({ ...input, targetBytes: larger })).not.toHaveProperty('failure');
      }),
      { numRuns: 150, seed: SEED },
    );
  });

  it('is deterministic', () => {
    fc.assert(
      fc.property(cases, (input) => {
        expect(planCompaction(input)).toEqual(planCompaction({ ...input, items: structuredClone(input.items) }));
      }),
      { numRuns: 60, seed: SEED },
    );
  });
});

function expectPartition(input: PlanInput, plan: Plan): void {
  const { items, entries, keepFirst } = input;
  const kept = keptIndices(plan, items.length);
  const all = [...plan.middle, ...kept].sort((a, b) => a - b);
  expect(all).toEqual(Array.from({ length: items.length - keepFirst }, (_, k) => keepFirst + k));
  expect(plan.middle).toEqual([...plan.middle].sort((a, b) => a - b));
  expect(plan.kept).toHaveLength(kept.length);
  // Units are kept or condensed whole: the tail starts at a unit, the pinned input is a unit of its own.
  const units = unitsOf(entries, keepFirst);
  expect(units.map(([start]) => start)).toContain(plan.tailStart);
  for (const i of plan.pinned) expect(units).toContainEqual([i, i + 1]);
  const lastUser = lastOfRole(entries, 'user', keepFirst);
  expect(plan.pinned).toEqual(lastUser >= keepFirst && lastUser < plan.tailStart ? [lastUser] : []);
  // A reasoning item (joinsNext) goes where the item after it goes.
  const region = (i: number) => (plan.middle.includes(i) ? 'middle' : 'kept');
  entries.forEach((e, i) => {
    if (e.joinsNext && i >= keepFirst && i + 1 < items.length) expect(region(i)).toBe(region(i + 1));
  });
  kept.forEach((i, k) => {
    if (plan.kept[k] !== items[i]) expect(dialect(input).describe(plan.kept[k])).toEqual(entries[i]);
  });
  if (lastUser >= keepFirst) expect(plan.kept[kept.indexOf(lastUser)]).toBe(items[lastUser]);
}

function dialect(input: PlanInput): Dialect {
  return input.dialect as Dialect;
}

/**
 * The cut order of shrink.ts, seen from the outside: every kept item but the last user input, oldest
 * first, images before texts, and the last item only after all the others. A content cut in one
 * item means every older cuttable content of that kind was cut already; `plan.cut` counts them.
 */
function expectOldestFirst(input: PlanInput, plan: Plan): void {
  const kept = keptIndices(plan, input.items.length);
  const lastUser = lastOfRole(input.entries, 'user', input.keepFirst);
  const slots = kept.map((i) => input.dialect.slots(input.items[i]));
  const changed = slots.map((list, k) =>
    list.map((s) => JSON.stringify(getAt(plan.kept[k], s.path)) !== JSON.stringify(getAt(input.items[kept[k]], s.path))),
  );
  expect(changed.flat().filter(Boolean).length).toBe(plan.cut);
  if (lastUser >= 0) expect(changed[kept.indexOf(lastUser)]?.some(Boolean) ?? false).toBe(false);

  const last = kept.length - 1;
  const older = kept.map((_, k) => k).filter((k) => k !== last && kept[k] !== lastUser);
  const state = (k: number, kind: Slot['kind']) => {
    const mine = slots[k].map((s, j) => ({ s, cut: changed[k][j] })).filter(({ s }) => s.kind === kind && cuttable(s));
    return { any: mine.some((m) => m.cut), all: mine.every((m) => m.cut), has: mine.length > 0 };
  };
  for (const kind of ['image', 'text'] as const) {
    older.forEach((k, n) => {
      if (!state(k, kind).any) return;
      for (const j of older.slice(0, n)) if (state(j, kind).has) expect(state(j, kind).all).toBe(true);
    });
  }
  const textCut = older.some((k) => state(k, 'text').any);
  if (textCut) for (const k of older) if (state(k, 'image').has) expect(state(k, 'image').all).toBe(true);
  if (kept[last] !== lastUser && changed[last].some(Boolean)) {
    for (const k of older) for (const kind of ['image', 'text'] as const) if (state(k, kind).has) expect(state(k, kind).all).toBe(true);
  }
}

/** Whether shrink.ts can make this content smaller at all. */
function cuttable(slot: Slot): boolean {
  if (slot.kind === 'image') return jsonBytes(slot.value) > 200;
  return slot.text.length > 2 * MIN_KEEP_CHARS && jsonTextBytes(slot.text) > textFloor(slot.text);
}
