import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { assemble, planCompaction } from '../../src/compaction/plan.js';
import { jsonBytes } from '../../src/compaction/size.js';
import type { ChatMessage, Plan, PlanInput } from '../../src/compaction/types.js';
import { validateCompaction } from '../../src/compaction/validate.js';
import { conversationArb, deepFreeze } from './conversations.js';

/** Random conversations with random settings; targets between 20% and 100% of the input. */
const caseArb = fc
  .record({
    messages: conversationArb,
    keepRecent: fc.integer({ min: 1, max: 10 }),
    fraction: fc.double({ min: 0.2, max: 1, noNaN: true }),
    summaryReserveBytes: fc.integer({ min: 100, max: 3000 }),
  })
  .map(({ messages, keepRecent, fraction, summaryReserveBytes }): PlanInput => ({
    messages: deepFreeze(messages),
    keepRecent,
    summaryReserveBytes,
    targetBytes: Math.round(jsonBytes(messages) * fraction),
  }));

/** A summary message of exactly the reserved size, the worst case the plan must allow for. */
function fullSummary(reserveBytes: number): ChatMessage {
  return { role: 'user', content: 's'.repeat(reserveBytes - jsonBytes({ role: 'user', content: '' })) };
}

const outcomes = new Map<string, number>();
const count = (key: string): void => void outcomes.set(key, (outcomes.get(key) ?? 0) + 1);

describe('planCompaction on random conversations', () => {
  afterAll(() => console.log('plan outcomes:', Object.fromEntries(outcomes)));

  it('every plan assembles into a valid, smaller request within the target', () => {
    fc.assert(
      fc.property(caseArb, (input) => {
        const plan = planCompaction(input);
        if ('failure' in plan) return void count(plan.failure);
        count(plan.shrunkContents + plan.replacedImages > 0 ? 'plan, tail shrunk' : 'plan');
        const compacted = assemble(plan, plan.middle.length > 0 ? fullSummary(input.summaryReserveBytes) : null);
        expect(validateCompaction(input.messages, compacted)).toEqual([]);
        expect(jsonBytes(compacted)).toBeLessThanOrEqual(input.targetBytes);
        expect(jsonBytes(compacted)).toBeLessThan(jsonBytes(input.messages));
      }),
      { numRuns: 400 },
    );
    expect(outcomes.get('plan') ?? 0).toBeGreaterThan(40);
    expect(outcomes.get('plan, tail shrunk') ?? 0).toBeGreaterThan(10);
  });

  it('every plan partitions the messages in order, keeping the unshrunk ones as the same objects', () => {
    fc.assert(
      fc.property(caseArb, (input) => {
        const plan = planCompaction(input);
        if ('failure' in plan) return;
        expectPartition(input.messages, plan);
      }),
      { numRuns: 200 },
    );
  });

  it('a plan that fits a target also fits any larger target below the input size', () => {
    fc.assert(
      fc.property(caseArb, fc.double({ min: 0, max: 1, noNaN: true }), (input, where) => {
        if ('failure' in planCompaction(input)) return;
        const inputBytes = jsonBytes(input.messages);
        const larger = Math.floor(input.targetBytes + (inputBytes - 1 - input.targetBytes) * where);
        expect(planCompaction({ ...input, targetBytes: larger })).not.toHaveProperty('failure');
      }),
      { numRuns: 200 },
    );
  });

  it('is deterministic', () => {
    fc.assert(
      fc.property(caseArb, (input) => {
        expect(planCompaction(input)).toEqual(planCompaction({ ...input, messages: structuredClone(input.messages) }));
      }),
      { numRuns: 100 },
    );
  });
});

function expectPartition(messages: ChatMessage[], plan: Plan): void {
  const { head, middle, pinned, tail } = plan;
  expect(head.length + middle.length + pinned.length + tail.length).toBe(messages.length);
  head.forEach((m, i) => expect(m).toBe(messages[i]));
  const tailStart = messages.length - tail.length;
  tail.forEach((m, i) => {
    const before = messages[tailStart + i];
    if (m !== before) expect({ role: m.role, id: m.tool_call_id }).toEqual({ role: before.role, id: before.tool_call_id });
  });
  const rest = messages.slice(head.length, tailStart);
  expect([...middle, ...pinned].sort((a, b) => rest.indexOf(a) - rest.indexOf(b))).toEqual(rest);
  expect(middle).toEqual(rest.filter((m) => !pinned.includes(m)));
  if (pinned.length > 0) expect(pinned[0]).toBe(messages.findLast((m) => m.role === 'user'));
  if (tail[0]) expect(tail[0].role).not.toBe('tool');
}
