import type { Entry } from '../dialects/types.js';
import { forEachInSlices, letOthersRun } from '../lib/time-slice.js';
import { condense, type Planned } from './condense.js';
import { finish } from './finish.js';
import type { Compactable, CompactionInput, CompactionSettings } from './input.js';
import { maskOutputs } from './mask.js';
import { planCompaction, range } from './plan.js';
import { applyRecalled, type RecalledView } from './recalled.js';
import { notShrunk, type CompactionResult, type NotShrunkWhy } from './result.js';
import { SUMMARY_BYTES_PER_TOKEN, itemBytes, itemsBytes } from './size.js';
import { keptPrefixEnd, maskedSpan, rememberedSpan, spanOf } from './span.js';
import type { Summarizer } from './summarizer-port.js';

export type { Compactable, CompactionSettings, SummaryEvent } from './input.js';
export type { RememberedSpan } from './recalled.js';
export type { BoundFigures, CompactionResult } from './result.js';
export { keptPrefixEnd, type NewSpan } from './span.js';
export type { Summarizer } from './summarizer-port.js';

/** The share of the conversation budget a summary may take at most. */
const SUMMARY_SHARE = 0.25;

/**
 * Plans a smaller conversation, fills the condensed part with an LLM summary (or the
 * deterministic fallback) and returns the body to send. With a remembered compaction, its summary
 * stands in for the span it covers: reused as it is while the result fits, else only what has
 * aged out since is summarised, together with that summary. Only `summarizer.send` reaches the
 * network, and only when a summary is made.
 */
export async function compact(subject: Compactable, settings: CompactionSettings, summarizer: Summarizer): Promise<CompactionResult> {
  let input: CompactionInput = { ...subject, ...settings, summarizer };
  const { items } = input.conversation;
  const figures = { messagesBefore: items.length, bytesBefore: input.bodyBytes, tokensBefore: input.target.tokensBefore };
  // Each item measured once, between time slices; each phase below then runs in a tick of its own.
  await forEachInSlices(items, itemBytes);
  const overhead = input.bodyBytes - itemsBytes(items);
  const fixedEnd = keptPrefixEnd(input.conversation);
  let view = input.recalled ? applyRecalled(items, fixedEnd, input.recalled) : plainView(items, fixedEnd);
  const fitItems = input.target.fitBytes - overhead;
  if (input.recalled && itemsBytes(view.items) < fitItems) {
    // The remembered summary alone brings it under: the same prefix bytes as last time.
    const same = range(0, view.items.length).map(view.origin);
    const span = rememberedSpan(input.recalled, fixedEnd);
    const summary = { strategy: input.recalled.strategy, calls: 0 };
    return finish({ input, figures, compacted: view.items, origins: same, summary, memory: 'hit', cut: 0, span });
  }
  const entries = input.recalled ? view.items.map((item) => input.dialect.describe(item)) : input.conversation.entries;
  // Masking extends no summary: only a masked span of its own, or none.
  const maskable = input.compaction.mask && !input.recalled;
  if (maskable || input.recalled?.strategy === 'mask') {
    // A limit nobody stated (only a refused size, or nothing) is a guess: mask as far as it goes.
    const guessed = input.target.exact !== true;
    const aimBytes = Math.min(input.target.aimBytes, input.target.fitBytes - 1) - overhead;
    const masked = input.compaction.mask
      ? await maskOutputs({ items: view.items, entries, dialect: input.dialect, keepFirst: view.keepFirst, aimBytes, all: guessed })
      : null;
    if (masked) {
      await letOthersRun();
      const { items: compacted, origins, span } = maskedSpan(input, view, masked, fixedEnd);
      const memory = input.recalled ? 'hit' : 'miss';
      return finish({ input, figures, compacted, origins, summary: { strategy: 'mask', calls: 0 }, memory, cut: 0, span, isNew: true });
    }
    // (Also with masking since turned off, or a replica that has it off: a masked span is read so.)
    if (input.recalled) {
      // A masked span keeps every position, so the masked list is the conversation as the model
      // has seen it lately: the summarizer reads that (the outputs it lost stay lost, and cost
      // no tokens), the trail the request's own items at the same positions.
      const masked = view;
      input = { ...input, recalled: null, stripAll: input.recalled.bound?.stripAll };
      view = { items: masked.items, keepFirst: fixedEnd, originalIndex: (i) => i, origin: masked.origin };
    }
  }
  // Aim low to leave room for the next turns (the tail stops growing there), but only what is
  // known to fit is a reason to cut kept content.
  await letOthersRun();
  const plan = planAt(input, view, entries, fitItems - 1, input.target.aimBytes - overhead);
  if ('failure' in plan) return notShrunk(figures, plan.failure);

  const summary = await condense(plan, view, entries, input, items);
  const oldSummary = view.keepFirst - fixedEnd - (input.recalled?.pinnedOffsets.length ?? 0);
  const made = summary.items.length > 0;
  const summaryPart = made ? summary.items : view.items.slice(fixedEnd, fixedEnd + oldSummary);
  const oldPins = view.items.slice(fixedEnd + oldSummary, view.keepFirst);
  const compacted = [...view.items.slice(0, fixedEnd), ...summaryPart, ...oldPins, ...plan.kept];
  const origins = [
    ...range(0, fixedEnd),
    ...summaryPart.map(() => null),
    ...range(fixedEnd + oldSummary, view.keepFirst).map(view.origin),
    ...[...plan.pinned, ...range(plan.tailStart, view.items.length)].map(view.origin),
  ];
  const span = made ? spanOf(view, plan, fixedEnd, summary, input) : input.recalled ? rememberedSpan(input.recalled, fixedEnd) : undefined;
  await letOthersRun();
  const memory = input.recalled ? 'hit' : 'miss';
  return finish({ input, figures, compacted, origins, summary, memory, cut: plan.cut, span, isNew: made });
}

function planAt(
  input: CompactionInput,
  view: RecalledView,
  entries: readonly Entry[],
  targetBytes: number,
  aimBytes: number,
): Planned | { failure: NotShrunkWhy } {
  const reserve = summaryReserve(input.summary.maxSummaryTokens, targetBytes);
  const plan = planCompaction({
    items: view.items,
    entries,
    dialect: input.dialect,
    keepFirst: view.keepFirst,
    keepRecent: input.compaction.keepRecent,
    targetBytes,
    aimBytes,
    summaryReserveBytes: reserve,
    newestWhole: input.newestWhole,
  });
  return 'failure' in plan ? plan : { ...plan, reserve };
}

function summaryReserve(maxSummaryTokens: number, targetBytes: number): number {
  const wanted = maxSummaryTokens * SUMMARY_BYTES_PER_TOKEN + 1_000;
  return Math.max(600, Math.min(wanted, Math.floor(targetBytes * SUMMARY_SHARE)));
}

function plainView(items: unknown[], fixedEnd: number): RecalledView {
  return { items, keepFirst: fixedEnd, originalIndex: (i) => i, origin: (i) => i };
}
