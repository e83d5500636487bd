import type { Config } from '../config/schema.js';
import type { Conversation, Dialect, Entry } from '../dialects/types.js';
import { rebind, type BoundMemory } from './bound.js';
import { headEnd, openingEnd } from './conversation.js';
import { clampSummaryText, fallbackSummaryText, summaryIntro } from './fallback.js';
import { planCompaction, range } from './plan.js';
import { applyRecalled, summaryItemsOf, type RecalledView, type RememberedSpan } from './recalled.js';
import { SUMMARY_BYTES_PER_TOKEN, itemBytes, itemsBytes, jsonBytes } from './size.js';
import { forEachInSlices, letOthersRun, mapInSlices } from '../lib/time-slice.js';
import { maskOutputs, type Masked } from './mask.js';
import { trailOf, trailText, type Trail } from './trail.js';
import { MIN_SUMMARY_TOKENS, providerCompact, summarize, type SummarySettings } from './summarize.js';
import { SummarizerError, type Summarizer, type SummarizerFailureKind, type SummarizerTokens } from './summarizer.js';
import type { SizeTarget } from './target.js';
import type { Plan, Strategy } from './types.js';
import { validateCompaction } from './validate.js';

export type { RememberedSpan } from './recalled.js';
export type { Summarizer } from './summarizer.js';
type NotShrunkWhy = 'no_messages' | 'too_many_items' | 'undecodable_body' | 'nothing_to_shrink' | 'cannot_fit' | 'invalid_plan';

/** What is compacted: the client's request as its dialect reads it, and what memory holds of it. Never modified. */
export interface Compactable {
  dialect: Dialect;
  /** The client's request, parsed, and its conversation. */
  request: Record<string, unknown>;
  conversation: Conversation;
  /** The headers the request goes upstream with: an opt-in the compaction adds joins them. */
  headers?: Record<string, string | string[]>;
  bodyBytes: number;
  /** A remembered compaction whose span this request repeats: its summary stands for the span. */
  recalled?: RememberedSpan | null;
  /** Every bound block after the edit point goes stripped (a remembered lesson of a span read anew). */
  stripAll?: boolean;
  /** The newest item is never cut to fit (an agent's own compaction call carries its instruction there). */
  newestWhole?: boolean;
}

/** What a summarizer run reports as it starts and as it ends (ok, or why it fell back). */
export type SummaryEvent =
  { phase: 'start'; items: number } | { phase: 'end'; ms: number; calls: number; failure?: SummarizerFailureKind; digested?: number };

/** What planning needs: the size to reach, why, and the config's knobs for it (nothing else of the config). */
export interface CompactionSettings {
  target: SizeTarget;
  /** Why the summary is there, in the words the summary's introduction uses. */
  because: string;
  compaction: Pick<Config['compaction'], 'strategy' | 'keepRecent' | 'mask' | 'summaryRole'>;
  /** What one summary may take and spend. */
  summary: Pick<Config['summarizer'], 'timeoutMs' | 'maxInputTokens' | 'maxSummaryTokens' | 'prompt' | 'maxCalls' | 'maxInputBytes'>;
  onSummary?: (event: SummaryEvent) => void;
}

/** The three of them, as the functions below read them. */
type CompactionInput = Compactable & CompactionSettings & { summarizer: Summarizer };

interface CompactionFigures {
  messagesBefore: number;
  bytesBefore: number;
  tokensBefore: number;
}

/** A new summary's span, for the memory: what a later turn of the conversation can reuse. */
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

/** What the compaction did to bound provider state (signed thinking) after its edit point. */
export interface BoundFigures {
  stripped: number;
  /** Stale blocks went covered by the provider's opt-in (`drop_block`) instead. */
  optIn: boolean;
}

/** The same compaction with every bound block after the edit point stripped; null when that changes nothing. */
type Restrip = () => { body: Buffer; headers: Record<string, string>; bound: BoundFigures; span: NewSpan | undefined } | null;

export type CompactionResult =
  | (CompactionFigures & {
      outcome: 'compacted';
      body: Buffer;
      strategy: Strategy;
      messagesAfter: number;
      bytesAfter: number;
      tokensAfter: number;
      summarizerMs?: number;
      summarizerCalls: number;
      /** What the summarizer calls took, where any were made. */
      summarizerTokens?: SummarizerTokens;
      summarizerFailure?: SummarizerFailureKind;
      /** The provider's own compaction was asked for and failed: the summarizer condensed instead. */
      providerFailure?: SummarizerFailureKind;
      /** Headers the body needs besides the request's own (an opt-in's beta). */
      headers: Record<string, string>;
      /** Null for an API with no bound state to strip. */
      bound: BoundFigures | null;
      restrip: Restrip;
      /** Whether a remembered summary was reused. */
      memory: 'hit' | 'miss';
      /** Kept contents shortened as the last resort. */
      cut: number;
      newSpan?: NewSpan;
      /** The span in force, new or remembered: what stood for which items (the status page shows it). */
      span?: NewSpan;
    })
  | (CompactionFigures & { outcome: 'not_shrunk'; why: NotShrunkWhy; summarizerCalls: 0 });

/** The share of the conversation budget a summary may take at most. */
const SUMMARY_SHARE = 0.25;
/** The share of a summary's bytes its trail may take, and at most this many bytes. */
const TRAIL_SHARE = 0.5;
const TRAIL_MAX_BYTES = 6 * 1024;

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
    return finish({
      input,
      figures,
      compacted: view.items,
      origins: same,
      summary: { strategy: input.recalled.strategy, calls: 0 },
      memory: 'hit',
      cut: 0,
      span,
    });
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
      return finishMasked(input, figures, view, masked, fixedEnd);
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
  const newSpan = made
    ? spanOf(view, plan, fixedEnd, summary, input.recalled, freshBound(input, plan.cut))
    : input.recalled
      ? rememberedSpan(input.recalled, fixedEnd)
      : undefined;
  await letOthersRun();
  return finish({
    input,
    figures,
    compacted,
    origins,
    summary,
    memory: input.recalled ? 'hit' : 'miss',
    cut: plan.cut,
    span: newSpan,
    isNew: made,
  });
}

/** A masked conversation, remembered as the span from the kept prefix to its last masked output. */
function finishMasked(
  input: CompactionInput,
  figures: CompactionFigures,
  view: RecalledView,
  masked: Masked,
  fixedEnd: number,
): CompactionResult {
  // The span is new from the kept prefix on, as every later turn rebuilds it from memory (copies
  // of its items): bound state in it goes as it will go then, not as it would on this turn alone.
  const copy = (item: unknown) => (typeof item === 'object' && item !== null && !Array.isArray(item) ? { ...item } : item);
  const items = masked.items.map((item, i) => (i >= fixedEnd && i < masked.end && item === view.items[i] ? copy(item) : item));
  masked = { ...masked, items };
  const origins = masked.items.map((item, i) => (item === view.items[i] ? view.origin(i) : null));
  const recalled = input.recalled;
  const span: NewSpan = {
    fixedEnd,
    spanLength: view.originalIndex(masked.end) - fixedEnd,
    pinnedOffsets: [],
    summary: masked.items.slice(fixedEnd, masked.end),
    summaryText: '',
    summarizedCount: masked.masked + (recalled?.summarizedCount ?? 0),
    strategy: 'mask',
    summarizerCalls: 0,
    bound: freshBound(input, 0),
  };
  return finish({
    input,
    figures,
    compacted: masked.items,
    origins,
    summary: { strategy: 'mask', calls: 0 },
    memory: recalled ? 'hit' : 'miss',
    cut: 0,
    span,
    isNew: true,
  });
}

/**
 * A new summary is a new prefix: every bound block the request carries was made before it. A cut
 * kept item is not rebuilt alike on a later turn, so nothing made after such a prefix is fresh either.
 */
function freshBound(input: CompactionInput, cut: number): BoundMemory {
  // A refusal's lesson holds for the conversation: it carries over to the summary's extensions.
  const stripAll = input.recalled?.bound?.stripAll === true || input.stripAll === true;
  return { freshFrom: cut > 0 ? Number.MAX_SAFE_INTEGER : input.conversation.items.length, stripAll };
}

/** The remembered compaction as it stands, for a turn that reuses its summary (entries from before bound state was kept: all stale). */
function rememberedSpan(entry: RememberedSpan, fixedEnd: number): NewSpan {
  const { spanLength, pinnedOffsets, summaryText, trail, summarizedCount, strategy, summarizerCalls } = entry;
  const bound = entry.bound ?? { freshFrom: Number.MAX_SAFE_INTEGER, stripAll: false };
  return {
    fixedEnd,
    spanLength,
    pinnedOffsets,
    summary: summaryItemsOf(entry),
    summaryText,
    trail,
    summarizedCount,
    strategy,
    summarizerCalls,
    bound,
  };
}

type Planned = Plan & { reserve: number };

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

/** A compacted list on its way out, and what made it. */
interface Finishing {
  input: CompactionInput;
  figures: CompactionFigures;
  compacted: unknown[];
  /** For each compacted item, the index of the conversation item it is, or null for a new one. */
  origins: readonly (number | null)[];
  summary: Pick<Condensed, 'strategy' | 'calls' | 'tokens' | 'ms' | 'failure' | 'providerFailure'>;
  memory: 'hit' | 'miss';
  cut: number;
  span?: NewSpan;
  isNew?: boolean;
}

/**
 * Validates and writes the compacted list, bound state rebound after the edit point. `span` is
 * what memory keeps of it: a new summary's span (`isNew`) is remembered as such; a reused one only
 * when a refusal changed how its bound state goes.
 */
function finish({ input, figures, compacted, origins, summary, memory, cut, span, isNew = false }: Finishing): CompactionResult {
  const remembered = span?.bound ?? freshBound(input, cut);
  // A cut item is not rebuilt alike on a later turn: nothing made after this prefix can be fresh.
  const state = cut > 0 ? { ...remembered, freshFrom: Number.MAX_SAFE_INTEGER } : remembered;
  const rebindAs = (m: BoundMemory) =>
    rebind(input.dialect.bound, input.request, input.headers ?? {}, input.conversation.items, compacted, origins, m);
  const rebound = rebindAs(state);
  if (validateCompaction(input.dialect, input.conversation.items, rebound.items).length > 0) return notShrunk(figures, 'invalid_plan');
  const body = input.dialect.write(rebound.request, rebound.items);
  if (body.length >= input.target.fitBytes) return notShrunk(figures, 'cannot_fit');
  const restrip: Restrip = () => {
    if (state.stripAll) return null;
    const all = rebindAs({ ...state, stripAll: true });
    if (all.stripped === rebound.stripped && all.optIn === rebound.optIn) return null;
    const strippedSpan = span && { ...span, bound: { ...span.bound, stripAll: true } };
    return {
      body: input.dialect.write(all.request, all.items),
      headers: all.headers,
      bound: { stripped: all.stripped, optIn: all.optIn },
      span: strippedSpan,
    };
  };
  return {
    ...figures,
    outcome: 'compacted',
    body,
    headers: rebound.headers,
    bound: input.dialect.bound ? { stripped: rebound.stripped, optIn: rebound.optIn } : null,
    restrip,
    strategy: summary.strategy,
    messagesAfter: input.dialect.wireCount(rebound.items),
    bytesAfter: body.length,
    tokensAfter: Math.round(body.length / input.target.bytesPerToken),
    summarizerMs: summary.ms,
    summarizerCalls: summary.calls,
    summarizerTokens: summary.tokens,
    summarizerFailure: summary.failure,
    providerFailure: summary.providerFailure,
    memory,
    cut,
    newSpan: isNew ? span : undefined,
    span,
  };
}

interface Condensed {
  /** What stands for the middle: one summary item, or the provider's window; none when nothing new was condensed. */
  items: unknown[];
  text: string;
  count: number;
  strategy: Strategy;
  calls: number;
  tokens?: SummarizerTokens;
  /** The trail of the work so far (a provider's window keeps none of its own). */
  trail?: Trail;
  ms?: number;
  failure?: SummarizerFailureKind;
  /** Why the provider's own compaction, asked for, was not used. */
  providerFailure?: SummarizerFailureKind;
}

/**
 * What stands for the plan's middle: the provider's own compaction where it is asked for, else
 * the summarizer's summary, else (it failed) the deterministic digest.
 */
async function condense(
  plan: Planned,
  view: RecalledView,
  entries: readonly Entry[],
  input: CompactionInput,
  original: readonly unknown[],
): Promise<Condensed> {
  const { compaction } = input;
  const recalled = input.recalled;
  const none = { items: [], text: '', count: 0, strategy: recalled?.strategy ?? compaction.strategy, calls: 0 };
  if (plan.middle.length === 0) return none;
  const count = plan.middle.length + (recalled?.summarizedCount ?? 0);
  const started = performance.now();
  const byProvider = compaction.strategy === 'fallback' ? null : await providerWindow(plan, view, input);
  if (byProvider && 'window' in byProvider)
    return { items: byProvider.window, text: '', count, strategy: 'provider', calls: byProvider.calls, ms: performance.now() - started };
  // A remembered window of the provider's cannot be read: its opaque items stay, the summary after them.
  const keptWindow = recalled ? summaryItemsOf(recalled).filter((item) => input.dialect.describe(item).role === 'opaque') : [];
  // Opaque items (encrypted reasoning, compaction items) are dropped whole, never read.
  const readableAt = plan.middle.filter((i) => entries[i].role !== 'opaque');
  const readable = await mapInSlices(readableAt, (i) => input.dialect.render(view.items[i]));
  // The trail reads the request's own items (a masked output is whole there).
  const own = (i: number, k: number) =>
    original[view.originalIndex(i)] === view.items[i] ? readable[k] : input.dialect.render(original[view.originalIndex(i)]);
  const trailItems = await mapInSlices(readableAt, (i, k) => ({ rendered: own(i, k), answers: entries[i].answers }));
  await letOthersRun();
  const trail = trailOf(trailItems, recalled?.trail);
  await letOthersRun();
  const intro = summaryIntro(count, input.because);
  const role = compaction.summaryRole;
  const budget = Math.max(0, plan.reserve - jsonBytes(input.dialect.summaryItem(intro, role)));
  // The trail takes what it needs of its share; the summary has the rest.
  const trailPart = trailText(trail, Math.min(TRAIL_MAX_BYTES, Math.floor(budget * TRAIL_SHARE)));
  const textBudget = Math.max(0, budget - (trailPart ? jsonBytes(`\n\n${trailPart}`) - 2 : 0));
  const made = (text: string, rest: Omit<Condensed, 'items' | 'text' | 'count' | 'trail'>): Condensed => {
    const clamped = clampSummaryText(text, textBudget);
    const whole = trailPart ? `${clamped}\n\n${trailPart}` : clamped;
    return { items: [...keptWindow, input.dialect.summaryItem(intro + whole, role)], text: clamped, trail, count, ...rest };
  };
  const middleBytes = itemsBytes(plan.middle.map((i) => view.items[i]));
  const fallback = () => [recalled?.summaryText, fallbackSummaryText(readable, middleBytes, textBudget)].filter(Boolean).join('\n\n');
  const earlierCalls = byProvider?.calls ?? 0;
  if (compaction.strategy === 'fallback') return made(fallback(), { strategy: 'fallback', calls: 0 });
  input.onSummary?.({ phase: 'start', items: readable.length });
  try {
    const settings = summarySettings(input, Math.floor(textBudget / SUMMARY_BYTES_PER_TOKEN));
    const result = await summarize(readable, settings, input.summarizer, recalled?.summaryText || undefined);
    const ms = performance.now() - started;
    input.onSummary?.({ phase: 'end', ms, calls: earlierCalls + result.calls, digested: result.digested || undefined });
    return made(result.text, {
      strategy: 'summarize',
      calls: earlierCalls + result.calls,
      tokens: result.tokens,
      ms,
      providerFailure: byProvider?.failure,
    });
  } catch (err) {
    if (!(err instanceof SummarizerError) || err.kind === 'aborted') throw err;
    const ms = performance.now() - started;
    input.onSummary?.({ phase: 'end', ms, calls: earlierCalls + err.calls, failure: err.kind });
    return made(fallback(), { strategy: 'fallback', calls: earlierCalls + err.calls, tokens: err.tokens, ms, failure: err.kind });
  }
}

/**
 * The provider's own compaction of the middle (after a remembered window of its own, which it can
 * read), where it is asked for and the middle fits what the upstream takes: its window, or why not.
 */
async function providerWindow(
  plan: Planned,
  view: RecalledView,
  input: CompactionInput,
): Promise<{ window: unknown[]; calls: number } | { failure: SummarizerFailureKind; calls: number } | null> {
  if (!input.summarizer.providerCompaction || !input.summarizer.wire.compact) return null;
  // What stood for the older span goes with it, our summary as readable text, a window as it is.
  const earlier = input.recalled ? summaryItemsOf(input.recalled) : [];
  const items = [...earlier, ...plan.middle.map((i) => view.items[i])];
  // The compaction call is a request to the same model: what is over the limit cannot go there either.
  if (itemsBytes(items) >= input.target.fitBytes) return null;
  try {
    return await providerCompact(items, summarySettings(input, input.summary.maxSummaryTokens), input.summarizer);
  } catch (err) {
    if (!(err instanceof SummarizerError) || err.kind === 'aborted') throw err;
    return { failure: err.kind, calls: err.calls };
  }
}

/** The span of the original request that the new summary stands for, with its pinned items. */
function spanOf(
  view: RecalledView,
  plan: Plan,
  fixedEnd: number,
  summary: Condensed,
  recalled: RememberedSpan | null | undefined,
  bound: BoundMemory,
): NewSpan {
  const spanEnd = view.originalIndex(plan.tailStart);
  return {
    fixedEnd,
    spanLength: spanEnd - fixedEnd,
    pinnedOffsets: [...(recalled?.pinnedOffsets ?? []), ...plan.pinned.map((i) => view.originalIndex(i) - fixedEnd)],
    summary: summary.items,
    summaryText: summary.text,
    trail: summary.trail ?? recalled?.trail,
    summarizedCount: summary.count,
    strategy: summary.strategy,
    summarizerCalls: summary.calls + (recalled?.summarizerCalls ?? 0),
    bound,
  };
}

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

/** The largest opening input kept whole before the summary. */
const OPENING_MAX_BYTES = 32 * 1024;

function plainView(items: unknown[], fixedEnd: number): RecalledView {
  return { items, keepFirst: fixedEnd, originalIndex: (i) => i, origin: (i) => i };
}

function summarySettings(input: CompactionInput, maxSummaryTokens: number): SummarySettings {
  const s = input.summary;
  return {
    request: input.request,
    timeoutMs: s.timeoutMs,
    maxInputTokens: s.maxInputTokens,
    maxSummaryTokens: Math.max(MIN_SUMMARY_TOKENS, Math.min(s.maxSummaryTokens, maxSummaryTokens)),
    prompt: s.prompt,
    maxCalls: s.maxCalls,
    maxInputBytes: s.maxInputBytes,
  };
}

function summaryReserve(maxSummaryTokens: number, targetBytes: number): number {
  const wanted = maxSummaryTokens * SUMMARY_BYTES_PER_TOKEN + 1_000;
  return Math.max(600, Math.min(wanted, Math.floor(targetBytes * SUMMARY_SHARE)));
}

function notShrunk(figures: CompactionFigures, why: NotShrunkWhy): CompactionResult {
  return { ...figures, outcome: 'not_shrunk', why, summarizerCalls: 0 };
}
