import type { BoundState } from '../dialects/types.js';

/*
 * Bound provider state (Anthropic's signed thinking) after the edit point is fresh (made after the model
 * saw this very compacted prefix) or stale: stripped, or kept under the opt-in where the API refuses
 * removal. Stale blocks all precede fresh ones, so stripping removes thinking from the start of the run,
 * which the binding allows; a stripped block is never put back.
 */

/** So that every later turn rebuilds it alike. */
export interface BoundMemory {
  freshFrom: number;
  /** Set after the upstream refused a rebinding. */
  stripAll: boolean;
}

export interface Rebound {
  items: unknown[];
  request: Record<string, unknown>;
  headers: Record<string, string>;
  stripped: number;
  optIn: boolean;
}

/** `origins[i]`: where in `original` `items[i]` came from (null: new, as a summary). */
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

function editPoint(original: readonly unknown[], items: readonly unknown[]): number {
  const i = items.findIndex((item, at) => item !== original[at]);
  return i < 0 ? items.length : i;
}
