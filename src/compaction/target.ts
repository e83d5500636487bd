import type { OverlongReason, StatedLimits } from '../overlong/types.js';

export interface SizeTarget {
  /** The replayed body must not exceed this many bytes. */
  bodyBytes: number;
  /** How many body bytes one token takes in this request, as far as the error tells. */
  bytesPerToken: number;
  /** The rejected prompt's size in tokens: stated by the error, or estimated. */
  tokensBefore: number;
}

/** Aim this far under a stated limit: token counts are estimates, and tokenisers differ. */
const HEADROOM = 0.85;
/** With no numbers to go on, halve the request. */
const BLIND_SHRINK = 0.5;
/**
 * A 413 that states no limit: the most common body limit in front of APIs is nginx's default
 * client_max_body_size of 1 MiB, so aim under it, unless the request was far bigger than that
 * (then a tenth of it). Only oversized recent contents are cut to reach it.
 */
const COMMON_BODY_LIMIT = 0.9 * 1024 * 1024;
const BLIND_413_SHARE = 0.1;
/** Whatever the numbers say, a replay is at most this share of the rejected body. */
const MAX_SHARE = 0.8;
/** Without a stated prompt size: bytes per token assumed, low on purpose (code and JSON tokenise densely). */
const DEFAULT_BYTES_PER_TOKEN = 3;

/**
 * How small the replay must be. From a context-length error with numbers: under the stated window
 * minus the completion it must leave room for, converted to bytes with this request's own
 * bytes-per-token ratio. From a 413: under the stated body limit, or well under the rejected size.
 */
export function sizeTarget(
  reason: OverlongReason,
  limits: StatedLimits,
  bodyBytes: number,
  requestedCompletionTokens: number | undefined,
): SizeTarget {
  const bytesPerToken = limits.promptTokens ? clamp(bodyBytes / limits.promptTokens, 1, 8) : DEFAULT_BYTES_PER_TOKEN;
  const tokensBefore = limits.promptTokens ?? Math.round(bodyBytes / bytesPerToken);
  let target = bodyBytes * BLIND_SHRINK;
  if (reason === 'context_length' && limits.limitTokens) {
    const completion = limits.completionTokens ?? requestedCompletionTokens ?? 0;
    target = Math.max(0, limits.limitTokens - completion) * HEADROOM * bytesPerToken;
  } else if (reason === 'body_too_large') {
    target = limits.limitBytes
      ? limits.limitBytes * HEADROOM
      : Math.min(target, Math.max(COMMON_BODY_LIMIT, bodyBytes * BLIND_413_SHARE));
  }
  return { bodyBytes: Math.floor(Math.min(target, bodyBytes * MAX_SHARE)), bytesPerToken, tokensBefore };
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
