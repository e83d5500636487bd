import type { Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import { applyRecalled, type MemoryEntry, type RecalledView } from '../memory/index.js';
import { clampSummaryText, fallbackSummaryText, summaryMessage, summaryTextBudget } from './fallback.js';
import { assemble, leadingInstructionsEnd, planCompaction } from './plan.js';
import { messagesBytes } from './size.js';
import { SummarizerError, summarize, type SummarizerFailureKind } from './summarize.js';
import type { SizeTarget } from './target.js';
import { contentText } from './transcript.js';
import type { ChatMessage, Plan } from './types.js';
import { validateCompaction } from './validate.js';

export type Strategy = 'summarize' | 'fallback';
export type NotShrunkWhy = 'no_messages' | 'nothing_to_shrink' | 'cannot_fit' | 'invalid_plan';

export interface CompactionInput {
  /** The client's request, parsed. Never modified. */
  request: Record<string, unknown>;
  bodyBytes: number;
  target: SizeTarget;
  config: Readonly<Config>;
  dispatcher: Dispatcher;
  /** The upstream base URL and the credentials the request used, for the summarizer's defaults. */
  upstreamUrl: string;
  requestAuth: Record<string, string>;
  signal: AbortSignal;
  /** A remembered compaction whose span this request repeats: its summary stands in for the span. */
  recalled?: MemoryEntry | null;
}

export interface CompactionFigures {
  messagesBefore: number;
  bytesBefore: number;
  tokensBefore: number;
}

/** A new summary's span, for the memory: what a later turn of the conversation can reuse. */
export interface NewSpan {
  headEnd: number;
  spanLength: number;
  pinnedOffsets: number[];
  summary: ChatMessage;
  summarizedCount: number;
  strategy: Strategy;
  summarizerCalls: number;
}

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
      summarizerFailure?: SummarizerFailureKind;
      /** Whether a remembered summary was reused. */
      memory: 'hit' | 'miss';
      newSpan?: NewSpan;
    })
  | (CompactionFigures & { outcome: 'not_shrunk'; why: NotShrunkWhy; summarizerCalls: 0 });

/** The share of the messages budget a summary may take at most. */
const SUMMARY_SHARE = 0.25;
const BYTES_PER_SUMMARY_TOKEN = 4;

/**
 * Plans a smaller `messages` array, fills the condensed middle with an LLM summary (or the
 * deterministic fallback) and returns the body to send. With a remembered compaction, its summary
 * stands in for the span it covers, and only what has aged out of the kept tail since is
 * summarised, together with that summary. Only the summarizer touches the network.
 */
export async function compact(input: CompactionInput): Promise<CompactionResult> {
  const messages = input.request.messages;
  const figures = {
    messagesBefore: Array.isArray(messages) ? messages.length : 0,
    bytesBefore: input.bodyBytes,
    tokensBefore: input.target.tokensBefore,
  };
  if (!isMessageArray(messages) || messages.length === 0) return notShrunk(figures, 'no_messages');

  const headEnd = leadingInstructionsEnd(messages);
  const view = input.recalled ? applyRecalled(messages, headEnd, input.recalled) : plainView(messages, headEnd);
  const messagesTarget = input.target.bodyBytes - (input.bodyBytes - messagesBytes(messages));
  if (input.recalled && messagesBytes(view.messages) <= messagesTarget) {
    // The remembered summary alone brings it under: the same prefix bytes as last time.
    return finish(input, figures, view.messages, { strategy: input.recalled.strategy, calls: 0 }, 'hit');
  }

  const reserve = summaryReserve(input.config, messagesTarget);
  const plan = planCompaction({
    messages: view.messages,
    keepRecent: input.config.compaction.keepRecent,
    targetBytes: messagesTarget,
    summaryReserveBytes: reserve,
    keepFirst: view.keepFirst,
  });
  if ('failure' in plan) return notShrunk(figures, plan.failure);

  const summary = await condense(plan, reserve, input);
  const compacted =
    input.recalled && summary.message
      ? [...messages.slice(0, headEnd), summary.message, ...view.messages.slice(headEnd + 1, view.keepFirst), ...plan.pinned, ...plan.tail]
      : assemble(plan, summary.message);
  const newSpan = summary.message ? spanOf(view, plan, headEnd, summary.message, summary, input.recalled) : undefined;
  return finish(input, figures, compacted, summary, input.recalled ? 'hit' : 'miss', newSpan);
}

function finish(
  input: CompactionInput,
  figures: CompactionFigures,
  compacted: ChatMessage[],
  summary: Pick<Condensed, 'strategy' | 'calls' | 'ms' | 'failure'>,
  memory: 'hit' | 'miss',
  newSpan?: NewSpan,
): CompactionResult {
  const original = input.request.messages as ChatMessage[];
  if (validateCompaction(original, compacted).length > 0) return notShrunk(figures, 'invalid_plan');
  const body = Buffer.from(JSON.stringify({ ...input.request, messages: compacted }));
  if (body.length > input.target.bodyBytes) return notShrunk(figures, 'cannot_fit');
  return {
    ...figures,
    outcome: 'compacted',
    body,
    strategy: summary.strategy,
    messagesAfter: compacted.length,
    bytesAfter: body.length,
    tokensAfter: Math.round(body.length / input.target.bytesPerToken),
    summarizerMs: summary.ms,
    summarizerCalls: summary.calls,
    summarizerFailure: summary.failure,
    memory,
    newSpan,
  };
}

interface Condensed {
  message: ChatMessage | null;
  strategy: Strategy;
  calls: number;
  ms?: number;
  failure?: SummarizerFailureKind;
}

/** The summary message for the plan's middle: from the summarizer, or the fallback if it fails. */
async function condense(plan: Plan, reserve: number, input: CompactionInput): Promise<Condensed> {
  const { compaction } = input.config;
  const previous = input.recalled ? summaryTextOf(input.recalled.summary) : undefined;
  if (plan.middle.length === 0) return { message: null, strategy: input.recalled?.strategy ?? compaction.strategy, calls: 0 };
  const count = plan.middle.length + (input.recalled?.summarizedCount ?? 0);
  const budget = summaryTextBudget(reserve, count, compaction.summaryRole);
  const wrap = (text: string) => summaryMessage(clampSummaryText(text, budget), count, compaction.summaryRole);
  const fallback = () => wrap([previous, fallbackSummaryText(plan.middle, budget)].filter(Boolean).join('\n\n'));
  if (compaction.strategy === 'fallback') return { message: fallback(), strategy: 'fallback', calls: 0 };
  const started = performance.now();
  try {
    const settings = summarizerSettings(input, Math.floor(budget / BYTES_PER_SUMMARY_TOKEN));
    const result = await summarize(plan.middle, settings, input.signal, previous);
    return { message: wrap(result.text), strategy: 'summarize', calls: result.calls, ms: performance.now() - started };
  } catch (err) {
    if (!(err instanceof SummarizerError) || err.kind === 'aborted') throw err;
    return { message: fallback(), strategy: 'fallback', calls: err.calls, ms: performance.now() - started, failure: err.kind };
  }
}

/** The span of the original request that the new summary stands for, with its pinned messages. */
function spanOf(
  view: RecalledView,
  plan: Plan,
  headEnd: number,
  summary: ChatMessage,
  condensed: Condensed,
  recalled: MemoryEntry | null | undefined,
): NewSpan {
  const spanEnd = view.originalIndex(view.keepFirst + plan.middle.length + plan.pinned.length);
  const pinned = plan.pinned.map((m) => view.originalIndex(view.messages.indexOf(m, view.keepFirst)) - headEnd);
  return {
    headEnd,
    spanLength: spanEnd - headEnd,
    pinnedOffsets: [...(recalled?.pinnedOffsets ?? []), ...pinned],
    summary,
    summarizedCount: plan.middle.length + (recalled?.summarizedCount ?? 0),
    strategy: condensed.strategy,
    summarizerCalls: condensed.calls + (recalled?.summarizerCalls ?? 0),
  };
}

function plainView(messages: ChatMessage[], headEnd: number): RecalledView {
  return { messages, keepFirst: headEnd, originalIndex: (i) => i };
}

/** The text of a summary message, without the gateway's introduction. */
function summaryTextOf(message: ChatMessage): string {
  const text = contentText(message.content);
  const start = text.indexOf('Summary:\n\n');
  return start >= 0 ? text.slice(start + 'Summary:\n\n'.length) : text;
}

function summarizerSettings(input: CompactionInput, maxSummaryTokens: number) {
  const s = input.config.summarizer;
  return {
    url: s.url ?? input.upstreamUrl,
    model: s.model ?? String(input.request.model ?? ''),
    auth: s.apiKey ? { authorization: `Bearer ${s.apiKey}` } : input.requestAuth,
    timeoutMs: s.timeoutMs,
    maxInputTokens: s.maxInputTokens,
    maxSummaryTokens: Math.max(64, Math.min(s.maxSummaryTokens, maxSummaryTokens)),
    maxTokensField: 'max_completion_tokens' in input.request ? ('max_completion_tokens' as const) : ('max_tokens' as const),
    prompt: s.prompt,
    dispatcher: input.dispatcher,
  };
}

function summaryReserve(config: Readonly<Config>, messagesTarget: number): number {
  const wanted = config.summarizer.maxSummaryTokens * BYTES_PER_SUMMARY_TOKEN + 1_000;
  return Math.max(600, Math.min(wanted, Math.floor(messagesTarget * SUMMARY_SHARE)));
}

export function requestedCompletion(request: Record<string, unknown>): number | undefined {
  const value = request.max_completion_tokens ?? request.max_tokens;
  return typeof value === 'number' && value > 0 ? value : undefined;
}

export function isMessageArray(value: unknown): value is ChatMessage[] {
  return (
    Array.isArray(value) &&
    value.every((m) => typeof m === 'object' && m !== null && !Array.isArray(m) && typeof (m as ChatMessage).role === 'string')
  );
}

function notShrunk(figures: CompactionFigures, why: NotShrunkWhy): CompactionResult {
  return { ...figures, outcome: 'not_shrunk', why, summarizerCalls: 0 };
}
