import { DEFAULT_BYTES_PER_TOKEN, type Bounds } from '../compaction/size-target.js';
import type { OverlongReason, StatedLimits } from '../overlong/types.js';

/*
 * A lesson is the upstream's statement about the request it refused, so it is learned only when it fits
 * that request (a request cannot overflow a limit more than twice its size), believed only for requests
 * at least half as large (a window stated on 200 KB says nothing trustworthy about 5 KB), and dropped when
 * a request it says cannot fit is accepted. Between these, bounds only tighten.
 */

export interface LearnedLimit extends Bounds {
  windowFrom?: number;
  bodyLimitFrom?: number;
}

const BELIEVED_SHARE = 0.5;
/** No text tokenises coarser: an accepted body over this many bytes per token of a window disproves it. */
const MOST_BYTES_PER_TOKEN = 8;

/** Bytes per token are the conversation's, never learned per model. */
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

export function disprovedFrom(limit: LearnedLimit): number {
  const { limitTokens, limitBytes, refusedBytes } = limit;
  return Math.min(
    limitTokens !== undefined ? Math.floor(limitTokens * MOST_BYTES_PER_TOKEN) + 1 : Infinity,
    limitBytes !== undefined ? Math.floor(limitBytes) + 1 : Infinity,
    refusedBytes ?? Infinity,
  );
}

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
