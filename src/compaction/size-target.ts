import type { OverlongReason, StatedLimits } from '../overlong/types.js';

/*
 * A compaction aims at a share of the limit, so the next turns fit under the same summary without
 * another one. A stated limit is the limit; a refused body of N bytes says the limit is below N.
 */

export type LimitSource = 'stated' | 'learned' | 'default';

export interface SizeTarget {
  fitBytes: number;
  aimBytes: number;
  bytesPerToken: number;
  tokensBefore: number;
  source: LimitSource;
  bounds?: Bounds;
  /** False when only a refused size is known: the aim is a guess. */
  exact?: boolean;
}

export interface Bounds {
  limitTokens?: number;
  bytesPerToken?: number;
  completionCounted?: boolean;
  limitBytes?: number;
  refusedBytes?: number;
}

/** Stay this far under a limit believed exact: token counts are estimates, tokenisers differ. */
const HEADROOM = 0.9;
/** Room for the headers some proxies count in. */
const BYTE_HEADROOM = 0.98;
const REFUSED_SHARE = 0.9;
/** nginx's default client_max_body_size (1 MiB), the most common body limit in front of APIs. */
const COMMON_BODY_LIMIT = 0.9 * 1024 * 1024;
const BIG_BODY_SHARE = 0.1;
const BLIND_AIM = 0.5;
const BLIND_FIT = 0.8;
const MAX_SHARE = 0.8;
/** Low on purpose: code and JSON tokenise densely. */
export const DEFAULT_BYTES_PER_TOKEN = 3;

export interface Rejection {
  reason: OverlongReason;
  limits: StatedLimits;
  bodyBytes: number;
  requested: number | undefined;
}

/** Bytes per token depend on the content (images count many tokens in few bytes): never another conversation's. */
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

export function boundsAfter(
  rejection: Rejection,
  learned: Bounds | undefined,
  conversation?: number,
): { bounds: Bounds; bytesPerToken: number } {
  const { limits, bodyBytes } = rejection;
  const stated = statedBounds(rejection);
  // A limit this error states is the truth now; a learned ratio is another request's.
  const { refusedBytes: _refused, ...statedLimits } = stated;
  const { bytesPerToken: _theirs, ...bounds } = { ...smallest(stated, learned ?? {}), ...statedLimits };
  const bytesPerToken = limits.promptTokens
    ? clamp(bodyBytes / limits.promptTokens, 1, 8)
    : clamp(conversation ?? DEFAULT_BYTES_PER_TOKEN, 1, 8);
  return { bounds: { ...bounds, bytesPerToken }, bytesPerToken };
}

export function fitFor(bounds: Bounds, bytesPerToken: number, completion: number): number {
  const target = fromBounds(bounds, bytesPerToken, completion, 1, Infinity);
  return target ? Math.floor(target.fit) : Infinity;
}

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

function statedBounds({ reason, limits, bodyBytes }: Rejection): Bounds {
  if (reason === 'body_too_large' && limits.limitBytes) return { limitBytes: limits.limitBytes };
  if (reason === 'context_length' && limits.limitTokens)
    return { limitTokens: limits.limitTokens, completionCounted: completionCounted(limits) };
  return { refusedBytes: bodyBytes };
}

function learnedAnything(learned: Bounds | undefined): boolean {
  return Boolean(learned && (learned.limitTokens || learned.limitBytes || learned.refusedBytes));
}

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

/** Lossless: only when the numbers show the prompt fits and only prompt plus completion does not. */
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

function completionCounted(limits: StatedLimits): boolean {
  return (limits as { completionCounted?: boolean }).completionCounted === true || limits.completionTokens !== undefined;
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
