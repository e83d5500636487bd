import { compact, type CompactionResult, type RememberedSpan, type SummaryEvent } from '../compaction/index.js';
import type { SizeTarget } from '../compaction/size-target.js';
import type { Conversation } from '../dialects/types.js';
import type { RescueContext } from './context.js';
import { seconds } from './report.js';
import { summarizerFor } from './summarizer-client.js';

/** Why a compaction was made, in the words its summary's introduction uses. */
export const BECAUSE = {
  body_too_large: "the request exceeded the upstream's size limit",
  context_length: "the request exceeded the model's context window",
  ahead: "the conversation had outgrown the upstream's limit before",
} as const;

export interface CompactOptions {
  because: string;
  /** A remembered compaction this conversation extends. */
  recalled?: RememberedSpan | null;
  /** Log the summarizer run's start and end (the rescue after a refusal does). */
  logSummary?: boolean;
  /** Masking, then the deterministic digest: no summarizer call (an agent's own compaction call). */
  digestOnly?: boolean;
}

/**
 * The one way the rescue compacts a request, after a refusal and ahead of the first attempt
 * alike: the conversation its dialect read from `json`, to `target`, with the config's settings,
 * the summarizer of this request's upstream and its deadline.
 */
export async function compactFor(
  ctx: RescueContext,
  json: Record<string, unknown>,
  conversation: Conversation,
  target: SizeTarget,
  o: CompactOptions,
): Promise<CompactionResult> {
  const config = ctx.deps.config;
  const deadline = deadlineAfter(config.summarizer.timeoutMs);
  try {
    return await compact(
      {
        dialect: ctx.dialect,
        request: json,
        conversation,
        headers: ctx.headers,
        bodyBytes: ctx.incoming.bytes,
        recalled: o.recalled,
        newestWhole: o.digestOnly,
      },
      {
        target,
        because: o.because,
        compaction: o.digestOnly ? { ...config.compaction, strategy: 'fallback' } : config.compaction,
        summary: config.summarizer,
        deadline: deadline.signal,
        onSummary: o.logSummary ? (e) => logSummary(ctx, e) : undefined,
      },
      summarizerFor(ctx, target),
    );
  } finally {
    deadline.clear();
  }
}

/**
 * A timer of our own, not AbortSignal.timeout: on Node 20 that signal can be garbage-collected
 * before it fires, and a stalled summarizer would then hold the client forever.
 */
function deadlineAfter(ms: number): { signal: AbortSignal; clear: () => void } {
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(new DOMException('the summarizer did not answer in time', 'TimeoutError')), ms);
  return { signal: timeout.signal, clear: () => clearTimeout(timer) };
}

function logSummary(ctx: RescueContext, e: SummaryEvent): void {
  const api = ctx.dialect.api;
  if (e.phase === 'start') ctx.log.info({ api, items: e.items }, `summarizing ${e.items} items for a compaction`);
  else if (e.failure)
    ctx.log.warn(
      { api, ms: Math.round(e.ms), calls: e.calls, failure: e.failure },
      `summarizer failed (${e.failure}) after ${seconds(e.ms)}; using the deterministic digest`,
    );
  else if (e.digested) {
    const { maxCalls, maxInputBytes } = ctx.deps.config.summarizer;
    ctx.log.info(
      { api, ms: Math.round(e.ms), calls: e.calls, digested: e.digested, maxCalls, maxInputBytes },
      `summary ready in ${seconds(e.ms)} (${e.calls} summarizer calls); the summarizer's cost cap for one compaction (${maxCalls} calls, ${maxInputBytes} bytes) was reached, so the oldest ${e.digested} messages went to the deterministic digest`,
    );
  } else
    ctx.log.info(
      { api, ms: Math.round(e.ms), calls: e.calls },
      `summary ready in ${seconds(e.ms)} (${e.calls} summarizer call${e.calls === 1 ? '' : 's'})`,
    );
}
