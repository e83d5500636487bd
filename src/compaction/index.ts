import type { Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import type { OverlongReason, StatedLimits } from '../overlong/types.js';
import { clampSummaryText, fallbackSummaryText, summaryMessage, summaryTextBudget } from './fallback.js';
import { assemble, planCompaction } from './plan.js';
import { messagesBytes } from './size.js';
import { SummarizerError, summarize, type SummarizerFailureKind } from './summarize.js';
import { sizeTarget } from './target.js';
import type { ChatMessage, Plan } from './types.js';
import { validateCompaction } from './validate.js';

export type Strategy = 'summarize' | 'fallback';
export type NotShrunkWhy = 'no_messages' | 'nothing_to_shrink' | 'cannot_fit' | 'invalid_plan';

export interface CompactionInput {
  /** The client's request, parsed. Never modified. */
  request: Record<string, unknown>;
  bodyBytes: number;
  reason: OverlongReason;
  limits: StatedLimits;
  config: Readonly<Config>;
  dispatcher: Dispatcher;
  /** The upstream base URL and the credentials the request used, for the summarizer's defaults. */
  upstreamUrl: string;
  requestAuth: Record<string, string>;
  signal: AbortSignal;
}

export interface CompactionFigures {
  messagesBefore: number;
  bytesBefore: number;
  tokensBefore: number;
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
    })
  | (CompactionFigures & { outcome: 'not_shrunk'; why: NotShrunkWhy; summarizerCalls: 0 });

/** The share of the messages budget a summary may take at most. */
const SUMMARY_SHARE = 0.25;
const BYTES_PER_SUMMARY_TOKEN = 4;

/**
 * Plans a smaller `messages` array for a request the upstream rejected as overlong, fills the
 * condensed middle with an LLM summary (or the deterministic fallback) and returns the body to
 * replay. Only the summarizer touches the network; the rest is pure.
 */
export async function compact(input: CompactionInput): Promise<CompactionResult> {
  const messages = input.request.messages;
  const target = sizeTarget(input.reason, input.limits, input.bodyBytes, requestedCompletion(input.request));
  const figures = { messagesBefore: Array.isArray(messages) ? messages.length : 0, bytesBefore: input.bodyBytes, tokensBefore: target.tokensBefore };
  if (!isMessageArray(messages) || messages.length === 0) return notShrunk(figures, 'no_messages');

  const outside = input.bodyBytes - messagesBytes(messages);
  const messagesTarget = target.bodyBytes - outside;
  const reserve = summaryReserve(input.config, messagesTarget);
  const plan = planCompaction({ messages, keepRecent: input.config.compaction.keepRecent, targetBytes: messagesTarget, summaryReserveBytes: reserve });
  if ('failure' in plan) return notShrunk(figures, plan.failure);

  const summary = await condense(plan, reserve, input);
  const compacted = assemble(plan, summary.message);
  const problems = validateCompaction(messages, compacted);
  if (problems.length > 0) return notShrunk(figures, 'invalid_plan');

  const body = Buffer.from(JSON.stringify({ ...input.request, messages: compacted }));
  if (body.length > target.bodyBytes) return notShrunk(figures, 'cannot_fit');
  return {
    ...figures,
    outcome: 'compacted',
    body,
    strategy: summary.strategy,
    messagesAfter: compacted.length,
    bytesAfter: body.length,
    tokensAfter: Math.round(body.length / target.bytesPerToken),
    summarizerMs: summary.ms,
    summarizerCalls: summary.calls,
    summarizerFailure: summary.failure,
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
  if (plan.middle.length === 0) return { message: null, strategy: compaction.strategy, calls: 0 };
  const budget = summaryTextBudget(reserve, plan.middle.length, compaction.summaryRole);
  const wrap = (text: string) => summaryMessage(clampSummaryText(text, budget), plan.middle.length, compaction.summaryRole);
  if (compaction.strategy === 'fallback') {
    return { message: wrap(fallbackSummaryText(plan.middle, budget)), strategy: 'fallback', calls: 0 };
  }
  const started = performance.now();
  try {
    const settings = summarizerSettings(input, Math.floor(budget / BYTES_PER_SUMMARY_TOKEN));
    const result = await summarize(plan.middle, settings, input.signal);
    return { message: wrap(result.text), strategy: 'summarize', calls: result.calls, ms: performance.now() - started };
  } catch (err) {
    if (!(err instanceof SummarizerError) || err.kind === 'aborted') throw err;
    return {
      message: wrap(fallbackSummaryText(plan.middle, budget)),
      strategy: 'fallback',
      calls: err.calls,
      ms: performance.now() - started,
      failure: err.kind,
    };
  }
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

function requestedCompletion(request: Record<string, unknown>): number | undefined {
  const value = request.max_completion_tokens ?? request.max_tokens;
  return typeof value === 'number' && value > 0 ? value : undefined;
}

function isMessageArray(value: unknown): value is ChatMessage[] {
  return Array.isArray(value) && value.every((m) => typeof m === 'object' && m !== null && !Array.isArray(m) && typeof (m as ChatMessage).role === 'string');
}

function notShrunk(figures: CompactionFigures, why: NotShrunkWhy): CompactionResult {
  return { ...figures, outcome: 'not_shrunk', why, summarizerCalls: 0 };
}

