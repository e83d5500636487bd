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

export interface NewSpan {
  fixedEnd: number;
  spanLength: number;
  pinnedOffsets: number[];
  summary: unknown[];
  summaryText: string;
  trail?: Trail;
  summarizedCount: number;
  strategy: Strategy;
  summarizerCalls: number;
  bound: BoundMemory;
}

const OPENING_MAX_BYTES = 32 * 1024;

/**
 * A large opening (a pasted file as the task) is condensed with the rest. A fixed size, so every turn
 * agrees on it: the compaction memory finds a conversation by that prefix.
 */
export function keptPrefixEnd(conversation: Conversation): number {
  const head = headEnd(conversation.entries);
  const opening = openingEnd(conversation.entries);
  return itemsBytes(conversation.items.slice(head, opening)) > OPENING_MAX_BYTES ? head : opening;
}

/** A cut kept item is not rebuilt alike on a later turn, so nothing made after such a prefix is fresh. */
export function freshBound(input: CompactionInput, cut: number): BoundMemory {
  // A refusal's lesson holds for the conversation: it carries over to the summary's extensions.
  const stripAll = input.recalled?.bound?.stripAll === true || input.stripAll === true;
  return { freshFrom: cut > 0 ? Number.MAX_SAFE_INTEGER : input.conversation.items.length, stripAll };
}

/** Entries from before bound state was kept: all stale. */
export function rememberedSpan(entry: RememberedSpan, fixedEnd: number): NewSpan {
  const { spanLength, pinnedOffsets, summaryText, trail, summarizedCount, strategy, summarizerCalls } = entry;
  const bound = entry.bound ?? { freshFrom: Number.MAX_SAFE_INTEGER, stripAll: false };
  const summary = summaryItemsOf(entry);
  return { fixedEnd, spanLength, pinnedOffsets, summary, summaryText, trail, summarizedCount, strategy, summarizerCalls, bound };
}

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

/** Bound state goes as it will when later turns rebuild the span from memory, not as on this turn alone. */
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
