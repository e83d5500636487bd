import { keptPrefixEnd } from '../../src/compaction/index.js';
import { planCompaction } from '../../src/compaction/plan.js';
import { jsonBytes } from '../../src/compaction/size.js';
import type { Plan, PlanFailure, PlanInput } from '../../src/compaction/types.js';
import type { Dialect } from '../../src/dialects/types.js';

/*
 * The planner as compact() drives it, for tests: entries from the dialect, the kept prefix from
 * keptPrefixEnd, and the compacted list assembled the way compact() assembles it.
 */

export type PlanOptions = Partial<Omit<PlanInput, 'items' | 'entries' | 'dialect'>>;

export function inputOf(dialect: Dialect, items: readonly unknown[], options: PlanOptions = {}): PlanInput {
  const entries = items.map((item) => dialect.describe(item));
  return {
    items,
    entries,
    dialect,
    keepFirst: keptPrefixEnd({ items: [...items], entries }),
    keepRecent: 4,
    targetBytes: 1e9,
    summaryReserveBytes: 100,
    ...options,
  };
}

export function planOf(dialect: Dialect, items: readonly unknown[], options: PlanOptions = {}): Plan & { input: PlanInput } {
  const input = inputOf(dialect, items, options);
  const outcome = planCompaction(input);
  if ('failure' in outcome) throw new Error(`expected a plan, got ${outcome.failure}`);
  return { ...outcome, input };
}

export function failureOf(dialect: Dialect, items: readonly unknown[], options: PlanOptions = {}): PlanFailure['failure'] | 'plan' {
  const outcome = planCompaction(inputOf(dialect, items, options));
  return 'failure' in outcome ? outcome.failure : 'plan';
}

/** `[...items[0..keepFirst], summary?, ...kept]`, as compact() sends it. */
export function assemble(input: PlanInput, plan: Plan, summary: unknown | null): unknown[] {
  return [...input.items.slice(0, input.keepFirst), ...(plan.middle.length > 0 && summary !== null ? [summary] : []), ...plan.kept];
}

/** The dialect's summary item padded to exactly `bytes` JSON bytes: the worst case a plan allows for. */
export function summaryOf(dialect: Dialect, bytes: number): unknown {
  const empty = jsonBytes(dialect.summaryItem('', 'user'));
  return dialect.summaryItem('s'.repeat(bytes - empty), 'user');
}

/** Indices of the items the plan keeps after the summary, in order (pinned, then the tail). */
export function keptIndices(plan: Plan, length: number): number[] {
  return [...plan.pinned, ...Array.from({ length: length - plan.tailStart }, (_, k) => plan.tailStart + k)];
}

/** The value at `path` inside `value`. */
export function getAt(value: unknown, path: readonly (string | number)[]): unknown {
  let here = value;
  for (const key of path) here = (here as Record<string | number, unknown> | undefined)?.[key];
  return here;
}
