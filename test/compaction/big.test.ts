import { describe, expect, it } from 'vitest';
import { clampSummaryText, fallbackSummaryText, summaryIntro } from '../../src/compaction/fallback.js';
import { planCompaction } from '../../src/compaction/plan.js';
import { itemsBytes, jsonBytes } from '../../src/compaction/size.js';
import type { Plan, PlanInput } from '../../src/compaction/types.js';
import { validateCompaction } from '../../src/compaction/validate.js';
import { chat } from '../../src/dialects/chat.js';
import { bigAgentConversation, calls, deepFreeze, loremText, result, rng } from './conversations.js';
import { assemble, inputOf } from './planning.js';

/** What compact() does with a plan when the summarizer fails. */
function compactWithFallback(input: PlanInput, plan: Plan): unknown[] {
  if (plan.middle.length === 0) return assemble(input, plan, null);
  const intro = summaryIntro(plan.middle.length, 'a test');
  const budget = input.summaryReserveBytes - jsonBytes(chat.summaryItem(intro, 'user'));
  const middle = plan.middle.map((i) => input.items[i]);
  const text = fallbackSummaryText(middle.map(chat.render), itemsBytes(middle), budget);
  return assemble(input, plan, chat.summaryItem(intro + clampSummaryText(text, budget), 'user'));
}

function planned(input: PlanInput): Plan {
  const plan = planCompaction(input);
  if ('failure' in plan) throw new Error(plan.failure);
  return plan;
}

describe('a 7 MB, 2,000-message agent conversation', () => {
  const messages = deepFreeze(bigAgentConversation());
  const inputBytes = jsonBytes(messages);

  it('is the size it claims', () => {
    expect(messages.length).toBeGreaterThan(1900);
    expect(messages.length).toBeLessThan(2100);
    expect(inputBytes).toBeGreaterThan(6.5e6);
    expect(inputBytes).toBeLessThan(7.5e6);
  });

  it('compacts to a valid request within the target: system, summary, last follow-up, recent', () => {
    const input = inputOf(chat, messages, { keepRecent: 20, targetBytes: 400_000, summaryReserveBytes: 16_000 });
    // The task carries a 200 KB screenshot: an opening over 32 KB is condensed with the rest.
    expect(input.keepFirst).toBe(1);
    const plan = planned(input);
    expect(plan.middle.length).toBeGreaterThan(1900);
    expect(plan.cut).toBe(0);
    const compacted = compactWithFallback(input, plan);
    expect(validateCompaction(chat, messages, compacted)).toEqual([]);
    expect(jsonBytes(compacted)).toBeLessThanOrEqual(input.targetBytes);
    expect(String((compacted[1] as { content: string }).content)).toContain('Tool calls:');
    expect(compacted[2]).toBe(messages.findLast((m) => m.role === 'user'));
    expect(plan.pinned).toHaveLength(1);
  });

  it('cuts a 5 MB tool output only when it is the newest, and only that much', () => {
    const huge = loremText(rng(5), 5_000_000);
    const withHuge = deepFreeze([...messages, calls('huge'), result('huge', huge)]);
    const input = inputOf(chat, withHuge, { keepRecent: 10, targetBytes: 500_000, summaryReserveBytes: 16_000 });
    const plan = planned(input);
    expect(plan.cut).toBe(1);
    const compacted = compactWithFallback(input, plan);
    expect(validateCompaction(chat, withHuge, compacted)).toEqual([]);
    expect(jsonBytes(compacted)).toBeLessThanOrEqual(input.targetBytes);
    // One more turn after it, and the 5 MB output is condensed instead of cut.
    const later = deepFreeze([...withHuge, calls('next'), result('next')]);
    expect(planned(inputOf(chat, later, { keepRecent: 10, targetBytes: 500_000, summaryReserveBytes: 16_000 })).cut).toBe(0);
  });
});
