import type { OverlongReason, StatedLimits } from '../overlong/types.js';

/*
 * How big a request may be. Two numbers: what is known to fit (a body at or above it is never
 * sent), and where a new compaction aims, a share of the limit, so that the next turns of the
 * conversation fit under the same summary without another one. Every rejection teaches a bound:
 * a stated limit is the limit; a refused body of N bytes says the limit is below N.
 */

export type LimitSource = 'stated' | 'learned' | 'default';

export interface SizeTarget {
  /** A body must be smaller than this to be sent. */
  fitBytes: number;
  aimBytes: number;
  /** How many body bytes one token takes in this request, as far as anything tells. */
  bytesPerToken: number;
  /** The request's size in tokens: stated by the error, or estimated. */
  tokensBefore: number;
  /** Where the limit came from: this error's numbers, what earlier rejections taught, or a guess. */
  source: LimitSource;
  /** The bounds it was computed from, for sizing other requests to the same model (the summarizer's). */
  bounds?: Bounds;
  /**
   * Whether a limit of the kind that refused is known (a window for a context error, a byte limit
   * for a 413), not only a size that was refused: else the aim is a guess.
   */
  exact?: boolean;
}

/** What earlier rejections taught about one upstream and model. */
export interface Bounds {
  limitTokens?: number;
  bytesPerToken?: number;
  /** Whether that error counted the requested completion in its total. */
  completionCounted?: boolean;
  limitBytes?: number;
  refusedBytes?: number;
}

/** Stay this far under a limit believed exact: token counts are estimates, tokenisers differ. */
const HEADROOM = 0.9;
/** A stated byte limit is exact; a little room for the headers some proxies count in. */
const BYTE_HEADROOM = 0.98;
/** Under a refused size that states no limit, only this share is believed to fit. */
const REFUSED_SHARE = 0.9;
/**
 * A 413 that states no limit: the most common body limit in front of APIs is nginx's default
 * client_max_body_size of 1 MiB, so a huge refused body aims under it (or a tenth of it).
 */
const COMMON_BODY_LIMIT = 0.9 * 1024 * 1024;
const BIG_BODY_SHARE = 0.1;
/** With no numbers at all: halve the request, and believe 80% of it would have fitted. */
const BLIND_AIM = 0.5;
const BLIND_FIT = 0.8;
/** A new compaction is at most this share of the rejected body, whatever the numbers say. */
const MAX_SHARE = 0.8;
/** Without a stated prompt size: bytes per token assumed, low on purpose (code and JSON tokenise densely). */
export const DEFAULT_BYTES_PER_TOKEN = 3;

export interface Rejection {
  reason: OverlongReason;
  limits: StatedLimits;
  bodyBytes: number;
  requested: number | undefined;
}

/**
 * The target after a rejection, with what was learned before (the smaller bound wins). Bytes per
 * token depend on the content (images and PDFs count many tokens in few bytes): this rejection's,
 * else `conversation`'s (what a rejection of this conversation said), never another's.
 */
export function sizeTarget(rejection: Rejection, learned: Bounds | undefined, ratio: number, conversation?: number): SizeTarget {
  const { limits, bodyBytes } = rejection;
  const stated = statedBounds(rejection);
  const { bounds, bytesPerToken } = boundsAfter(rejection, learned, conversation);
  const tokensBefore = limits.promptTokens ?? Math.round(bodyBytes / bytesPerToken);
  const target = fromBounds(bounds, bytesPerToken, rejection.requested, ratio, bodyBytes);
  const source: LimitSource =
    stated.limitTokens || stated.limitBytes ? 'stated' : learnedAnything(learned) || stated.refusedBytes ? 'learned' : 'default';
  const fit = target?.fit ?? bodyBytes * BLIND_FIT;
  const aim = Math.min(target?.aim ?? bodyBytes * BLIND_AIM, bodyBytes * MAX_SHARE);
  const exact = rejection.reason === 'body_too_large' ? Boolean(bounds.limitBytes) : Boolean(bounds.limitTokens || bounds.limitBytes);
  return { ...finish(fit, aim, bytesPerToken, tokensBefore, source), bounds, exact };
}

/** What is known after a rejection: its own bounds and what was learned before (the smaller wins), and bytes per token. */
export function boundsAfter(
  rejection: Rejection,
  learned: Bounds | undefined,
  conversation?: number,
): { bounds: Bounds; bytesPerToken: number } {
  const { limits, bodyBytes } = rejection;
  const stated = statedBounds(rejection);
  // A limit this error states is the truth now; what was learned adds only what it does not say
  // (and of refused sizes, the smallest is the bound). A learned ratio is another request's.
  const { refusedBytes: _refused, ...statedLimits } = stated;
  const { bytesPerToken: _theirs, ...bounds } = { ...smallest(stated, learned ?? {}), ...statedLimits };
  const bytesPerToken = limits.promptTokens
    ? clamp(bodyBytes / limits.promptTokens, 1, 8)
    : clamp(conversation ?? DEFAULT_BYTES_PER_TOKEN, 1, 8);
  return { bounds: { ...bounds, bytesPerToken }, bytesPerToken };
}

/**
 * The largest body known to fit a request to the same model that asks for `completion` tokens
 * (the summarizer's call, sized beside the rescued request); Infinity when nothing is known.
 */
export function fitFor(bounds: Bounds, bytesPerToken: number, completion: number): number {
  const target = fromBounds(bounds, bytesPerToken, completion, 1, Infinity);
  return target ? Math.floor(target.fit) : Infinity;
}

/** The target for a request sent compacted before any rejection: learned bounds only, in this conversation's bytes per token. */
export function learnedTarget(
  bodyBytes: number,
  learned: Bounds,
  ratio: number,
  requested: number | undefined,
  conversation?: number,
): SizeTarget | null {
  const bytesPerToken = clamp(conversation ?? DEFAULT_BYTES_PER_TOKEN, 1, 8);
  const tokensBefore = Math.round(bodyBytes / bytesPerToken);
  const target = fromBounds(learned, bytesPerToken, requested, ratio, Infinity);
  return target
    ? {
        ...finish(target.fit, target.aim, bytesPerToken, tokensBefore, 'learned'),
        bounds: learned,
        exact: Boolean(learned.limitTokens || learned.limitBytes),
      }
    : null;
}

function finish(fit: number, aim: number, bytesPerToken: number, tokensBefore: number, source: LimitSource): SizeTarget {
  const fitBytes = Math.floor(fit);
  return { fitBytes, aimBytes: Math.floor(Math.min(aim, fitBytes)), bytesPerToken, tokensBefore, source };
}

/** What this rejection itself says: a stated window or body limit, and a refused size for a 413. */
function statedBounds({ reason, limits, bodyBytes }: Rejection): Bounds {
  if (reason === 'body_too_large' && limits.limitBytes) return { limitBytes: limits.limitBytes };
  if (reason === 'context_length' && limits.limitTokens)
    return { limitTokens: limits.limitTokens, completionCounted: completionCounted(limits) };
  // No number stated: the refused size itself is the bound (for a context error, as bytes of
  // this model's requests, which grow with their tokens).
  return { refusedBytes: bodyBytes };
}

function learnedAnything(learned: Bounds | undefined): boolean {
  return Boolean(learned && (learned.limitTokens || learned.limitBytes || learned.refusedBytes));
}

/** The tighter of two sets of bounds, field by field. */
export function smallest(a: Bounds, b: Bounds): Bounds {
  const min = (x?: number, y?: number) => (x === undefined ? y : y === undefined ? x : Math.min(x, y));
  const tokensFromA = a.limitTokens !== undefined && (b.limitTokens === undefined || a.limitTokens <= b.limitTokens);
  return {
    limitTokens: min(a.limitTokens, b.limitTokens),
    completionCounted: tokensFromA ? a.completionCounted : b.completionCounted,
    bytesPerToken: a.bytesPerToken ?? b.bytesPerToken,
    limitBytes: min(a.limitBytes, b.limitBytes),
    refusedBytes: min(a.refusedBytes, b.refusedBytes),
  };
}

function fromBounds(
  bounds: Bounds,
  bytesPerToken: number,
  requested: number | undefined,
  ratio: number,
  rejectedBytes: number,
): { fit: number; aim: number } | null {
  const candidates: Array<{ fit: number; aim: number }> = [];
  if (bounds.limitTokens) {
    const completion = bounds.completionCounted ? (requested ?? 0) : 0;
    const room = Math.max(0, bounds.limitTokens - completion) * bytesPerToken;
    candidates.push({ fit: room * HEADROOM, aim: room * ratio });
  }
  if (bounds.limitBytes) candidates.push({ fit: bounds.limitBytes * BYTE_HEADROOM, aim: bounds.limitBytes * ratio });
  if (bounds.refusedBytes) {
    const refused = bounds.refusedBytes;
    candidates.push({
      fit: Math.min(refused * REFUSED_SHARE, refused - 1),
      aim: Math.min(refused * ratio, Math.max(COMMON_BODY_LIMIT, refused * BIG_BODY_SHARE)),
    });
  }
  if (candidates.length === 0) return null;
  return {
    fit: Math.min(...candidates.map((c) => c.fit), rejectedBytes - 1),
    aim: Math.min(...candidates.map((c) => c.aim)),
  };
}

/**
 * The lossless remedy: when the numbers show the prompt fits and only prompt plus the requested
 * completion does not, the completion limit lowered to what fits (with a margin). Null when the
 * numbers do not show that, or the lowered limit would fall below `floor`.
 */
export function clampedCompletion(
  reason: OverlongReason,
  limits: StatedLimits,
  requested: number | undefined,
  floor: number,
): number | null {
  if (reason !== 'context_length' || !completionCounted(limits) || !requested) return null;
  const { limitTokens, promptTokens } = limits;
  if (!limitTokens || !promptTokens || promptTokens >= limitTokens) return null;
  const margin = Math.max(64, Math.ceil(limitTokens * 0.01));
  const room = limitTokens - promptTokens - margin;
  return room < requested && room >= floor ? room : null;
}

/** Whether the error's numbers include the requested completion (it states one, or says so). */
function completionCounted(limits: StatedLimits): boolean {
  return (limits as { completionCounted?: boolean }).completionCounted === true || limits.completionTokens !== undefined;
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
