import { DEFAULT_BYTES_PER_TOKEN } from '../compaction/size-target.js';
import type { Verdict } from '../overlong/types.js';
import { blobBytes, judgeTruncation, type Truncation } from '../overlong/truncation.js';
import { credentialsOf } from '../upstream/discover.js';
import type { KnownWindow } from '../upstream/windows.js';
import { decodeText } from '../upstream/body.js';
import type { InspectedAnswer } from './inspect.js';
import { holdBudget, type RescueContext } from './context.js';
import { identityOf } from './identity.js';

/*
 * Windows known before sending (upstream/windows.ts): a request whose estimate passes its model's
 * window is made to fit before its first attempt; an answer's prompt count calibrates the estimate
 * and shows a silent truncation (overlong/truncation.ts).
 */

/** A request estimated under this share of its window is sent as it is, unparsed (and one that fits with the most of a completion counted, see overWindow). */
const UNREAD_SHARE = 0.5;
/** A request whose estimate (and completion, where the window counts it) passes this share of the window is made to fit. */
const FIT_SHARE = 0.95;
/** A request larger than this is not searched for base64 data: the search would hold the event loop too long. */
const MAX_SEARCHED_BYTES = 8 * 1024 * 1024;
/** Answers to requests smaller than this are not read for their counts: no server runs a window that small. */
const WATCHED_MIN_BYTES = 4096;

/**
 * The window in force for the request's model, when one is known. A request large enough that a
 * window could matter (WATCHED_MIN_BYTES, about a thousand tokens) starts a discovery for a model
 * whose window is not known, in the background; an agent's first request (its instructions and
 * tools) is that large, long before its conversation nears any window.
 */
export function windowFor(ctx: RescueContext, model = identityOf(ctx).model ?? ctx.notes.model): KnownWindow | undefined {
  if (!model) return undefined;
  return ctx.deps.windows.windowOf(
    ctx.upstream,
    ctx.dialect.api,
    model,
    credentialsOf(ctx.headers),
    ctx.incoming.bytes >= WATCHED_MIN_BYTES,
  );
}

/** The model a request names: in its path, off its first bytes, or, for a request large enough to need a window, from its body. */
async function modelFor(ctx: RescueContext): Promise<string | undefined> {
  const peeked = ctx.pathModel ?? ctx.notes.model;
  if (peeked || !ctx.deps.windows.knowsAny(ctx.upstream) || ctx.incoming.bytes < WATCHED_MIN_BYTES) return peeked;
  if (!(await holdBudget(ctx, 0)).held) return undefined;
  await ctx.incoming.load();
  // Read whole now: the access log and the answer's count go by it too.
  return (ctx.notes.model = identityOf(ctx).model);
}

/**
 * The verdict for a request over its model's known window: as if the upstream had stated the
 * window and counted the request at its calibrated estimate. Null when it fits, when no window is
 * known, or when it cannot be read (then it goes as sent).
 */
export async function overWindow(
  ctx: RescueContext,
): Promise<{ verdict: Extract<Verdict, { overlong: true }>; window: KnownWindow } | null> {
  const model = await modelFor(ctx);
  const window = windowFor(ctx, model);
  if (!model || !window) return null;
  const bytes = ctx.incoming.bytes;
  const estimate = Math.ceil(bytes / (ctx.deps.windows.bytesPerToken(ctx.upstream, model) ?? DEFAULT_BYTES_PER_TOKEN));
  if (estimate < window.tokens * UNREAD_SHARE) return null;
  // The most of a completion limit counted below: a request that fits with it is not read for its own.
  const mostCounted = window.completionCounted ? window.tokens * (1 - ctx.deps.config.compaction.targetRatio) : 0;
  if (estimate + mostCounted <= window.tokens * FIT_SHARE) return null;
  if (!(await holdBudget(ctx, 0)).held) return null;
  const json = await ctx.incoming.load();
  if (!json) return null;
  // A completion limit larger than what a compaction leaves of the window (Claude Code asks for
  // 32k-128k) is not counted: no compaction could make room for it. A server that counts it
  // refuses, and that refusal is rescued by lowering it.
  const asked = window.completionCounted ? ctx.dialect.completion(json) : undefined;
  const requested = asked !== undefined && asked <= mostCounted ? asked : undefined;
  if (estimate + (requested ?? 0) <= window.tokens * FIT_SHARE) return null;
  const limits = {
    limitTokens: window.tokens,
    promptTokens: estimate,
    ...(requested !== undefined ? { completionCounted: true as const, completionTokens: requested } : {}),
  };
  return { verdict: { overlong: true, reason: 'context_length', rule: `window_${window.source}`, limits }, window };
}

/** Whether a request is large enough that a window could matter (and a discovery may start for it). */
export function mayNearWindow(ctx: RescueContext): boolean {
  return ctx.incoming.bytes >= WATCHED_MIN_BYTES;
}

export function watched(ctx: RescueContext, bytes: number): boolean {
  return bytes >= WATCHED_MIN_BYTES && (ctx.pathModel ?? ctx.notes.model) !== undefined;
}

/** The prompt count the held start of an answer says (a whole JSON body; a Messages stream's message_start), when it says one. */
export function heldCount(ctx: RescueContext, answer: InspectedAnswer): number | undefined {
  const streamed = String(answer.response.headers['content-type'] ?? '').includes('text/event-stream');
  if (!streamed && !answer.held.complete) return undefined;
  return ctx.dialect.promptCount(decodeText(answer.held.bytes, answer.response.headers['content-encoding']));
}

/**
 * What an answer's count of `reported` prompt tokens says of a request of `sent` bytes: a cut
 * (and then the window is at most what was kept), or a calibration of the model's bytes per token.
 */
export function judgeAnswer(ctx: RescueContext, sent: SentBody, reported: number, stage: 'held' | 'streamed'): Truncation {
  const model = ctx.pathModel ?? ctx.notes.model;
  if (!model) return { truncated: false };
  const windows = ctx.deps.windows;
  const { bytes } = sent;
  const bytesPerToken = windows.bytesPerToken(ctx.upstream, model);
  let verdict = judgeTruncation({ bytes, reported, bytesPerToken });
  // Only a request that looks cut is searched for base64 data, counted in tiles, not bytes; one
  // too large to search in one stretch is not judged (nothing learned of it).
  if (verdict.truncated && bytes > MAX_SEARCHED_BYTES) return { truncated: false };
  const body = verdict.truncated ? sent.body() : null;
  if (body) verdict = judgeTruncation({ bytes, reported, bytesPerToken, blobBytes: blobBytes(body) });
  if (verdict.truncated) {
    windows.observe(ctx.upstream, model, reported);
    ctx.deps.metrics.truncations.inc({ api: ctx.dialect.api, upstream: ctx.upstream.name, stage });
  } else windows.calibrate(ctx.upstream, model, bytes, reported);
  return verdict;
}

/** The verdict a silent cut stands for: the window is at most what the upstream kept, the request what it was estimated at. */
export function truncationVerdict(cut: Extract<Truncation, { truncated: true }>): Extract<Verdict, { overlong: true }> {
  return {
    overlong: true,
    reason: 'context_length',
    rule: 'silent_truncation',
    limits: { limitTokens: cut.reported, promptTokens: cut.expected },
  };
}

export function logStreamedCut(ctx: RescueContext, cut: Extract<Truncation, { truncated: true }>, bytes: number): void {
  const model = ctx.pathModel ?? ctx.notes.model;
  ctx.log.warn(
    {
      truncation: {
        api: ctx.dialect.api,
        upstream: ctx.upstream.name,
        model,
        bytes,
        expectedTokens: cut.expected,
        reportedTokens: cut.reported,
      },
    },
    `the upstream silently cut a streamed ${ctx.dialect.api} request of ${model}: it counted ${cut.reported} prompt tokens of about ${cut.expected} sent; the stream was already on its way to the client, so it went as it was; the window is taken as ${cut.reported} tokens and the conversation's next turn is compacted ahead`,
  );
}

/** A request as the upstream got it: its size, and its bytes (plain JSON) when a cut is to be checked. */
export interface SentBody {
  bytes: number;
  body: () => Buffer | null;
}
