import { describe, expect, it } from 'vitest';
import { clampSummaryText, fallbackSummaryText, summaryMessage, summaryTextBudget } from '../../src/compaction/fallback.js';
import { assemble, planCompaction } from '../../src/compaction/plan.js';
import { jsonBytes } from '../../src/compaction/size.js';
import type { ChatMessage, Plan, PlanInput } from '../../src/compaction/types.js';
import { validateCompaction } from '../../src/compaction/validate.js';
import { bigAgentConversation, calls, deepFreeze, loremText, result, rng } from './conversations.js';

/** What the caller does with a plan when the summarizer fails. */
function compactWithFallback(input: PlanInput, plan: Plan): ChatMessage[] {
  const role = 'user';
  const budget = summaryTextBudget(input.summaryReserveBytes, plan.middle.length, role);
  const text = clampSummaryText(fallbackSummaryText(plan.middle, budget), budget);
  return assemble(plan, plan.middle.length > 0 ? summaryMessage(text, plan.middle.length, role) : null);
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

  it('compacts to a valid request within the target', () => {
    const input = { messages, keepRecent: 20, targetBytes: 400_000, summaryReserveBytes: 16_000 };
    const plan = planCompaction(input);
    if ('failure' in plan) throw new Error(plan.failure);
    expect(plan.head).toEqual([messages[0]]);
    expect(plan.middle.length).toBeGreaterThan(1900);
    const compacted = compactWithFallback(input, plan);
    expect(validateCompaction(messages, compacted)).toEqual([]);
    expect(jsonBytes(compacted)).toBeLessThanOrEqual(input.targetBytes);
    expect(String(compacted[1].content)).toContain('Tool calls:');
  });

  it('shrinks a 5 MB tool output that lands in the tail', () => {
    const huge = loremText(rng(5), 5_000_000);
    const withHuge = deepFreeze([...messages, calls('huge'), result('huge', huge)]);
    const input = { messages: withHuge, keepRecent: 10, targetBytes: 500_000, summaryReserveBytes: 16_000 };
    const plan = planCompaction(input);
    if ('failure' in plan) throw new Error(plan.failure);
    expect(plan.shrunkContents).toBe(1);
    const compacted = compactWithFallback(input, plan);
    expect(validateCompaction(withHuge, compacted)).toEqual([]);
    expect(jsonBytes(compacted)).toBeLessThanOrEqual(input.targetBytes);
  });
});
