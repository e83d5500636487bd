import { DEFAULT_BYTES_PER_TOKEN } from '../compaction/size-target.js';
import type { Verdict } from '../overlong/types.js';
import { blobBytes, judgeTruncation, type Truncation } from '../overlong/truncation.js';
import { credentialsOf } from '../upstream/discover.js';
import type { KnownWindow } from '../upstream/windows.js';
import { decodeText } from '../upstream/body.js';
import type { InspectedAnswer } from './inspect.js';
import { holdBudget, type RescueContext } from './context.js';
import { identityOf } from './identity.js';

/** Under this share of its window a request is sent unparsed. */
const UNREAD_SHARE = 0.5;
const FIT_SHARE = 0.95;
/** Larger is not searched for base64 data: the search would hold the event loop too long. */
const MAX_SEARCHED_BYTES = 8 * 1024 * 1024;
/** No server runs a window this small (about a thousand tokens). */
const WATCHED_MIN_BYTES = 4096;

/** An agent's first request (instructions and tools) is large enough to start a discovery, long before it nears any window. */
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

async function modelFor(ctx: RescueContext): Promise<string | undefined> {
  const peeked = ctx.pathModel ?? ctx.notes.model;
  if (peeked || !ctx.deps.windows.knowsAny(ctx.upstream) || ctx.incoming.bytes < WATCHED_MIN_BYTES) return peeked;
  if (!(await holdBudget(ctx, 0)).held) return undefined;
  await ctx.incoming.load();
  return (ctx.notes.model = identityOf(ctx).model);
}

/** As if the upstream had stated the window and counted the request at its calibrated estimate. */
export async function overWindow(
  ctx: RescueContext,
): Promise<{ verdict: Extract<Verdict, { overlong: true }>; window: KnownWindow } | null> {
  const model = await modelFor(ctx);
  const window = windowFor(ctx, model);
  if (!model || !window) return null;
  const bytes = ctx.incoming.bytes;
  const estimate = Math.ceil(bytes / (ctx.deps.windows.bytesPerToken(ctx.upstream, model) ?? DEFAULT_BYTES_PER_TOKEN));
  if (estimate < window.tokens * UNREAD_SHARE) return null;
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

export function mayNearWindow(ctx: RescueContext): boolean {
  return ctx.incoming.bytes >= WATCHED_MIN_BYTES;
}

export function watched(ctx: RescueContext, bytes: number): boolean {
  return bytes >= WATCHED_MIN_BYTES && (ctx.pathModel ?? ctx.notes.model) !== undefined;
}

export function heldCount(ctx: RescueContext, answer: InspectedAnswer): number | undefined {
  const streamed = String(answer.response.headers['content-type'] ?? '').includes('text/event-stream');
  if (!streamed && !answer.held.complete) return undefined;
  return ctx.dialect.promptCount(decodeText(answer.held.bytes, answer.response.headers['content-encoding']));
}

export function judgeAnswer(ctx: RescueContext, sent: SentBody, reported: number, stage: 'held' | 'streamed'): Truncation {
  const model = ctx.pathModel ?? ctx.notes.model;
  if (!model) return { truncated: false };
  const windows = ctx.deps.windows;
  const { bytes } = sent;
  const bytesPerToken = windows.bytesPerToken(ctx.upstream, model);
  let verdict = judgeTruncation({ bytes, reported, bytesPerToken });
  // Base64 data is counted in tiles, not bytes: only a request that looks cut is searched for it.
  if (verdict.truncated && bytes > MAX_SEARCHED_BYTES) return { truncated: false };
  const body = verdict.truncated ? sent.body() : null;
  if (body) verdict = judgeTruncation({ bytes, reported, bytesPerToken, blobBytes: blobBytes(body) });
  if (verdict.truncated) {
    windows.observe(ctx.upstream, model, reported);
    ctx.deps.metrics.truncations.inc({ api: ctx.dialect.api, upstream: ctx.upstream.name, stage });
  } else windows.calibrate(ctx.upstream, model, bytes, reported);
  return verdict;
}

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

export interface SentBody {
  bytes: number;
  body: () => Buffer | null;
}
