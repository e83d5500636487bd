import type { BoundMemory } from './bound.js';
import type { Trail } from './trail.js';
import type { Strategy } from './types.js';

/*
 * What memory holds of an earlier compaction of a conversation, as the compaction reads it: the
 * span its summary stands for. The memory (src/memory/) stores it with more besides (a digest,
 * sizes, a date); the compaction needs only this, and knows nothing of the store.
 */

export interface RememberedSpan {
  /** How many items after the kept prefix (instructions, opening input) the summary stands for, pinned ones included. */
  spanLength: number;
  /** Offsets within the span of items kept verbatim right after the summary (the pinned user input). */
  pinnedOffsets: number[];
  /** The exact summary item that replaced the span (null when several did: see summaryItems). */
  summary: unknown;
  /** Every item that replaced the span: one summary, or the provider's compaction window. */
  summaryItems?: unknown[];
  summaryText: string;
  /** The trail of the work the summary ends with (absent in entries from before it had one). */
  trail?: Trail;
  summarizedCount: number;
  strategy: Strategy;
  summarizerCalls: number;
  /** The compacted prefix's bound provider state; absent in entries from before (then all of it is stale). */
  bound?: BoundMemory;
}

/** The request with a remembered span replaced by its summary. */
export interface RecalledView {
  items: unknown[];
  /** Leading items to keep as they are: the kept prefix, the summary, pinned items. */
  keepFirst: number;
  /** Maps an index in `items` (at or after keepFirst) back to the original request. */
  originalIndex: (i: number) => number;
  /** Where any item of `items` came from in the original request; null for the summary. */
  origin: (i: number) => number | null;
}

/** The items that stand for a remembered span: its summary, or the provider's window (entries from before hold one item). */
export function summaryItemsOf(span: RememberedSpan): unknown[] {
  return Array.isArray(span.summaryItems) ? span.summaryItems : [span.summary];
}

/** The request as it reads with a remembered span replaced by its summary (pinned items kept). */
export function applyRecalled(items: readonly unknown[], fixedEnd: number, span: RememberedSpan): RecalledView {
  const summary = summaryItemsOf(span);
  const pinned = span.pinnedOffsets.map((o) => items[fixedEnd + o]);
  const pinsAt = fixedEnd + summary.length;
  const keepFirst = pinsAt + pinned.length;
  const rest = fixedEnd + span.spanLength;
  const originalIndex = (i: number) => rest + (i - keepFirst);
  return {
    items: [...items.slice(0, fixedEnd), ...summary, ...pinned, ...items.slice(rest)],
    keepFirst,
    originalIndex,
    origin: (i) => (i < fixedEnd ? i : i < pinsAt ? null : i < keepFirst ? fixedEnd + span.pinnedOffsets[i - pinsAt] : originalIndex(i)),
  };
}
