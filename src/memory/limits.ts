import { DEFAULT_BYTES_PER_TOKEN, type Bounds } from '../compaction/size-target.js';
import type { OverlongReason, StatedLimits } from '../overlong/types.js';

/*
 * What a refusal teaches about one tenant's requests to one upstream and model, and when that is
 * believed. A lesson is a statement by the upstream about the request it refused, so:
 *
 *   - it is learned only when it fits that request: a stated window of W tokens from a request the
 *     gateway estimates at S tokens (the error's own count when it states one, else bytes / 3) only
 *     when S >= W / 2, a stated body limit of L bytes only when the body was at least L / 2 (a
 *     request cannot have overflowed a limit more than twice its size, whatever the estimate's error);
 *   - it is believed only for requests like the one refused: at least half its size. A window stated
 *     on a 200 KB request says nothing trustworthy about a 5 KB one, which is rescued, if it is ever
 *     refused, by what its own refusal says. A refused size needs no such rule: it bounds only
 *     requests nearly as large (what fits is under 90% of it);
 *   - it is dropped when a request it says cannot fit is accepted: a body larger than a learned body
 *     limit or at least a refused size, or a body of more than 8 bytes for each token of a learned
 *     window (no text tokenises coarser than that, so that request surely had more tokens than the
 *     window). The next refusal states the truth again.
 *
 * Bounds still only tighten between these events: of two windows stated, the smaller is kept.
 */

/** What the memory keeps: the bounds, and the size of the refused request each stated limit came from. */
export interface LearnedLimit extends Bounds {
  /** Bytes of the refused request that stated `limitTokens`. */
  windowFrom?: number;
  /** Bytes of the refused request that stated `limitBytes`. */
  bodyLimitFrom?: number;
}

/** A learned limit is believed for requests at least this share of the size of the one that taught it. */
const BELIEVED_SHARE = 0.5;
/** The coarsest tokenisation there is: an accepted body of more than this many bytes per token of a window disproves it. */
const MOST_BYTES_PER_TOKEN = 8;

/**
 * What a refusal of `rejectedBytes` teaches: a stated window or body limit that fits the request
 * (see above), else the refused size itself. Bytes per token are the conversation's, never learned
 * per model.
 */
export function lessonOf(reason: OverlongReason, limits: StatedLimits, rejectedBytes: number): LearnedLimit {
  const window = limits.limitTokens;
  if (reason === 'context_length' && window) {
    const tokens = limits.promptTokens ?? rejectedBytes / DEFAULT_BYTES_PER_TOKEN;
    const completionCounted = limits.completionCounted === true || limits.completionTokens !== undefined;
    if (tokens >= window * BELIEVED_SHARE) return { limitTokens: window, completionCounted, windowFrom: rejectedBytes };
  }
  const bodyLimit = limits.limitBytes;
  if (reason === 'body_too_large' && bodyLimit && (limits.bodyBytes ?? rejectedBytes) >= bodyLimit * BELIEVED_SHARE) {
    return { limitBytes: bodyLimit, bodyLimitFrom: rejectedBytes };
  }
  return rejectedBytes > 0 ? { refusedBytes: rejectedBytes } : {};
}

/** A new lesson added to what was known: the smaller of two stated limits (with where it came from), the smaller refused size. */
export function mergedLimit(old: LearnedLimit | undefined, lesson: LearnedLimit): LearnedLimit {
  const out: LearnedLimit = { ...old };
  if (lesson.limitTokens !== undefined && (out.limitTokens === undefined || lesson.limitTokens <= out.limitTokens)) {
    const from =
      lesson.limitTokens === out.limitTokens ? Math.min(lesson.windowFrom ?? Infinity, out.windowFrom ?? Infinity) : lesson.windowFrom;
    Object.assign(out, { limitTokens: lesson.limitTokens, completionCounted: lesson.completionCounted, windowFrom: from });
  }
  if (lesson.limitBytes !== undefined && (out.limitBytes === undefined || lesson.limitBytes <= out.limitBytes)) {
    const from =
      lesson.limitBytes === out.limitBytes
        ? Math.min(lesson.bodyLimitFrom ?? Infinity, out.bodyLimitFrom ?? Infinity)
        : lesson.bodyLimitFrom;
    Object.assign(out, { limitBytes: lesson.limitBytes, bodyLimitFrom: from });
  }
  if (lesson.refusedBytes !== undefined) out.refusedBytes = Math.min(lesson.refusedBytes, out.refusedBytes ?? Infinity);
  return defined(out);
}

/** The bounds believed for a request of `bytes`: each stated limit only when the request is like the one that taught it. */
export function believed(limit: LearnedLimit | undefined, bytes: number): Bounds | undefined {
  if (!limit) return undefined;
  const { windowFrom, bodyLimitFrom, limitTokens, completionCounted, limitBytes, refusedBytes } = limit;
  const like = (from: number | undefined) => from === undefined || bytes >= from * BELIEVED_SHARE;
  const bounds = defined({
    ...(limitTokens !== undefined && like(windowFrom) ? { limitTokens, completionCounted } : {}),
    ...(limitBytes !== undefined && like(bodyLimitFrom) ? { limitBytes } : {}),
    refusedBytes,
  });
  return Object.keys(bounds).length > 0 ? bounds : undefined;
}

/** The smallest accepted request that disproves any part of `limit` (see loosened); Infinity when none can. */
export function disprovedFrom(limit: LearnedLimit): number {
  const { limitTokens, limitBytes, refusedBytes } = limit;
  return Math.min(
    limitTokens !== undefined ? Math.floor(limitTokens * MOST_BYTES_PER_TOKEN) + 1 : Infinity,
    limitBytes !== undefined ? Math.floor(limitBytes) + 1 : Infinity,
    refusedBytes ?? Infinity,
  );
}

/** What is left of a limit once a request of `bytes` was accepted; null when the acceptance disproves none of it. */
export function loosened(limit: LearnedLimit, bytes: number): LearnedLimit | null {
  const window = limit.limitTokens !== undefined && bytes / MOST_BYTES_PER_TOKEN > limit.limitTokens;
  const body = limit.limitBytes !== undefined && bytes > limit.limitBytes;
  const refused = limit.refusedBytes !== undefined && bytes >= limit.refusedBytes;
  if (!window && !body && !refused) return null;
  const { limitTokens, completionCounted, windowFrom, limitBytes, bodyLimitFrom, refusedBytes, ...rest } = limit;
  return defined({
    ...rest,
    ...(window ? {} : { limitTokens, completionCounted, windowFrom }),
    ...(body ? {} : { limitBytes, bodyLimitFrom }),
    ...(refused ? {} : { refusedBytes }),
  });
}

function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined && v !== Infinity)) as T;
}
