import type { Entry } from '../dialects/types.js';
import { mapInSlices, letOthersRun } from '../lib/time-slice.js';
import { clampSummaryText, fallbackSummaryText, summaryIntro } from './fallback.js';
import type { CompactionInput } from './input.js';
import { summaryItemsOf, type RecalledView } from './recalled.js';
import { SUMMARY_BYTES_PER_TOKEN, itemsBytes, jsonBytes } from './size.js';
import { MIN_SUMMARY_TOKENS } from './call-budget.js';
import { providerCompact, summarize, type SummarySettings } from './summary-pass.js';
import { SummarizerError, type SummarizerFailureKind, type SummarizerTokens } from './summarizer-port.js';
import { trailOf, trailText, type Trail } from './trail.js';
import type { Plan, Strategy } from './types.js';

export type Planned = Plan & { reserve: number };

export interface Condensed {
  items: unknown[];
  text: string;
  count: number;
  strategy: Strategy;
  calls: number;
  tokens?: SummarizerTokens;
  trail?: Trail;
  ms?: number;
  failure?: SummarizerFailureKind;
  providerFailure?: SummarizerFailureKind;
}

const TRAIL_SHARE = 0.5;
const TRAIL_MAX_BYTES = 6 * 1024;

export async function condense(
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
  const own = (i: number, k: number) =>
    original[view.originalIndex(i)] === view.items[i] ? readable[k] : input.dialect.render(original[view.originalIndex(i)]);
  const trailItems = await mapInSlices(readableAt, (i, k) => ({ rendered: own(i, k), answers: entries[i].answers }));
  await letOthersRun();
  const trail = trailOf(trailItems, recalled?.trail);
  await letOthersRun();
  const intro = summaryIntro(count, input.because);
  const role = compaction.summaryRole;
  const budget = Math.max(0, plan.reserve - jsonBytes(input.dialect.summaryItem(intro, role)));
  const trailPart = trailText(trail, Math.min(TRAIL_MAX_BYTES, Math.floor(budget * TRAIL_SHARE)));
  const textBudget = Math.max(0, budget - (trailPart ? jsonBytes(`\n\n${trailPart}`) - 2 : 0));
  const made = (text: string, rest: Omit<Condensed, 'items' | 'text' | 'count' | 'trail'>): Condensed => {
    const clamped = clampSummaryText(text, textBudget);
    const whole = trailPart ? `${clamped}\n\n${trailPart}` : clamped;
    return { items: [...keptWindow, input.dialect.summaryItem(intro + whole, role)], text: clamped, trail, count, ...rest };
  };
  // Sized only when the fallback is written: a pass over the whole middle, on the event loop.
  const fallback = () => {
    const middleBytes = itemsBytes(plan.middle.map((i) => view.items[i]));
    return [recalled?.summaryText, fallbackSummaryText(readable, middleBytes, textBudget)].filter(Boolean).join('\n\n');
  };
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

async function providerWindow(
  plan: Planned,
  view: RecalledView,
  input: CompactionInput,
): Promise<{ window: unknown[]; calls: number } | { failure: SummarizerFailureKind; calls: number } | null> {
  if (!input.summarizer.providerCompaction || !input.summarizer.wire.compact) return null;
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

function summarySettings(input: CompactionInput, maxSummaryTokens: number): SummarySettings {
  const s = input.summary;
  return {
    request: input.request,
    deadline: input.deadline,
    maxInputTokens: s.maxInputTokens,
    maxSummaryTokens: Math.max(MIN_SUMMARY_TOKENS, Math.min(s.maxSummaryTokens, maxSummaryTokens)),
    prompt: s.prompt,
    maxCalls: s.maxCalls,
    maxInputBytes: s.maxInputBytes,
  };
}
