import type { Conversation } from '../dialects/types.js';
import type { BoundMemory } from './bound.js';
import type { Condensed } from './condense.js';
import { headEnd, openingEnd } from './conversation.js';
import type { CompactionInput } from './input.js';
import type { Masked } from './mask.js';
import { summaryItemsOf, type RecalledView, type RememberedSpan } from './recalled.js';
import { itemsBytes } from './size.js';
import type { Trail } from './trail.js';
import type { Plan, Strategy } from './types.js';

/*
 * The span a summary stands for, as memory keeps it: where it starts and ends in the request,
 * which items stay pinned after it, what stands for it, and how fresh the bound state after it is.
 * A later turn of the conversation rebuilds the same prefix bytes from it.
 */

export interface NewSpan {
  fixedEnd: number;
  spanLength: number;
  pinnedOffsets: number[];
  /** The items that stand for the span: one summary, or the provider's compaction window. */
  summary: unknown[];
  summaryText: string;
  /** The trail the summary ends with, for the next summary to carry forward. */
  trail?: Trail;
  summarizedCount: number;
  strategy: Strategy;
  summarizerCalls: number;
  bound: BoundMemory;
}

/** The largest opening input kept whole before the summary. */
const OPENING_MAX_BYTES = 32 * 1024;

/**
 * The instructions and the opening input are kept before the summary, unless the opening itself
 * is large (a pasted file as the task): then it is condensed with the rest, and only the person's
 * last input is kept whole. A fixed size, so that every turn of a conversation agrees on it (the
 * compaction memory finds a conversation by that prefix).
 */
export function keptPrefixEnd(conversation: Conversation): number {
  const head = headEnd(conversation.entries);
  const opening = openingEnd(conversation.entries);
  return itemsBytes(conversation.items.slice(head, opening)) > OPENING_MAX_BYTES ? head : opening;
}

/**
 * A new summary is a new prefix: every bound block the request carries was made before it. A cut
 * kept item is not rebuilt alike on a later turn, so nothing made after such a prefix is fresh either.
 */
export function freshBound(input: CompactionInput, cut: number): BoundMemory {
  // A refusal's lesson holds for the conversation: it carries over to the summary's extensions.
  const stripAll = input.recalled?.bound?.stripAll === true || input.stripAll === true;
  return { freshFrom: cut > 0 ? Number.MAX_SAFE_INTEGER : input.conversation.items.length, stripAll };
}

/** The remembered compaction as it stands, for a turn that reuses its summary (entries from before bound state was kept: all stale). */
export function rememberedSpan(entry: RememberedSpan, fixedEnd: number): NewSpan {
  const { spanLength, pinnedOffsets, summaryText, trail, summarizedCount, strategy, summarizerCalls } = entry;
  const bound = entry.bound ?? { freshFrom: Number.MAX_SAFE_INTEGER, stripAll: false };
  const summary = summaryItemsOf(entry);
  return { fixedEnd, spanLength, pinnedOffsets, summary, summaryText, trail, summarizedCount, strategy, summarizerCalls, bound };
}

/** The span of the original request that the new summary stands for, with its pinned items. */
export function spanOf(view: RecalledView, plan: Plan, fixedEnd: number, summary: Condensed, input: CompactionInput): NewSpan {
  const recalled = input.recalled;
  return {
    fixedEnd,
    spanLength: view.originalIndex(plan.tailStart) - fixedEnd,
    pinnedOffsets: [...(recalled?.pinnedOffsets ?? []), ...plan.pinned.map((i) => view.originalIndex(i) - fixedEnd)],
    summary: summary.items,
    summaryText: summary.text,
    trail: summary.trail ?? recalled?.trail,
    summarizedCount: summary.count,
    strategy: summary.strategy,
    summarizerCalls: summary.calls + (recalled?.summarizerCalls ?? 0),
    bound: freshBound(input, plan.cut),
  };
}

/**
 * A masked conversation, its span from the kept prefix to its last masked output. The span is new
 * from the kept prefix on, as every later turn rebuilds it from memory (copies of its items): bound
 * state in it goes as it will go then, not as it would on this turn alone.
 */
export function maskedSpan(
  input: CompactionInput,
  view: RecalledView,
  masked: Masked,
  fixedEnd: number,
): { items: unknown[]; origins: (number | null)[]; span: NewSpan } {
  const copy = (item: unknown) => (typeof item === 'object' && item !== null && !Array.isArray(item) ? { ...item } : item);
  const items = masked.items.map((item, i) => (i >= fixedEnd && i < masked.end && item === view.items[i] ? copy(item) : item));
  const origins = items.map((item, i) => (item === view.items[i] ? view.origin(i) : null));
  const span: NewSpan = {
    fixedEnd,
    spanLength: view.originalIndex(masked.end) - fixedEnd,
    pinnedOffsets: [],
    summary: items.slice(fixedEnd, masked.end),
    summaryText: '',
    summarizedCount: masked.masked + (input.recalled?.summarizedCount ?? 0),
    strategy: 'mask',
    summarizerCalls: 0,
    bound: freshBound(input, 0),
  };
  return { items, origins, span };
}
