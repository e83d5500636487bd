import type { BoundState } from '../dialects/types.js';

/*
 * Provider state bound to the history before it (Anthropic's signed thinking) after a compaction
 * changed that history. The compacted list starts as the original's own items in place, up to the
 * edit point (the first position that is new, moved or cut); state there stays. After it, each bound
 * block is either fresh, made by the model when it was already shown this very compacted prefix
 * (it came in a turn after the compaction and passes untouched), or stale, made before: stale
 * blocks are stripped, or kept under the provider's opt-in where the API refuses their removal.
 *
 * Stale blocks all precede fresh ones, so stripping them removes thinking from the start of the
 * run of blocks the model has seen, which the binding allows; a stripped block is never put back.
 * The same memory gives the same bytes on every later turn.
 */

/** What the memory keeps of a compacted prefix's bound state, so that every later turn rebuilds it alike. */
export interface BoundMemory {
  /** Index, in the client's conversation, from which bound state was made after this prefix existed. */
  freshFrom: number;
  /**
   * Every bound block after the edit point is stripped, fresh or not (but for what the API insists
   * on, kept under its opt-in): set after the upstream refused a rebinding.
   */
  stripAll: boolean;
}

export interface Rebound {
  items: unknown[];
  request: Record<string, unknown>;
  /** Headers to set on the request sent (the opt-in's beta). */
  headers: Record<string, string>;
  stripped: number;
  /** Whether stale blocks go covered by the provider's opt-in (`drop_block`): the gateway's or the caller's. */
  optIn: boolean;
}

/**
 * `origins[i]` is the index in the client's conversation `original` that `items[i]` came from
 * (null: new, as a summary). Without a `bound` rule (APIs whose state the provider drops on its
 * own) nothing changes.
 */
export function rebind(
  bound: BoundState | null,
  request: Record<string, unknown>,
  headers: Record<string, string | string[]>,
  original: readonly unknown[],
  items: readonly unknown[],
  origins: readonly (number | null)[],
  memory: BoundMemory,
): Rebound {
  const unchanged: Rebound = { items: [...items], request, headers: {}, stripped: 0, optIn: false };
  if (!bound) return unchanged;
  const edit = editPoint(original, items);
  const stale = (i: number) => i >= edit && bound.count(items[i]) > 0 && (memory.stripAll || (origins[i] ?? -1) < memory.freshFrom);
  // What the API refuses to see removed stays, under the opt-in, even when everything else goes.
  const keep = items.map((_, i) => stale(i) && bound.mustKeep(request, items, i));
  const opt = keep.some(Boolean) ? bound.optIn(request, headers) : null;
  let stripped = 0;
  const out: unknown[] = [];
  items.forEach((item, i) => {
    if (!stale(i) || (keep[i] && opt)) return out.push(item);
    stripped += bound.count(item);
    const rest = bound.strip(item);
    if (rest !== null) out.push(rest);
  });
  if (stripped === 0 && !opt) return unchanged;
  return { items: out, request: opt?.request ?? request, headers: opt?.headers ?? {}, stripped, optIn: opt !== null };
}

/** The first position that does not hold the original's own item, unchanged (a summary, a moved item, a cut one). */
function editPoint(original: readonly unknown[], items: readonly unknown[]): number {
  const i = items.findIndex((item, at) => item !== original[at]);
  return i < 0 ? items.length : i;
}
