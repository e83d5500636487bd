import { lastOfRole, unitsOf } from './conversation.js';
import { shrinkKept } from './shrink.js';
import { itemBytes } from './size.js';
import type { Plan, PlanFailure, PlanInput } from './types.js';

/*
 * Nothing new is cut while something old can be condensed: the tail gives up its oldest units to the
 * middle before any kept content is shortened. Items are measured once; the rest is arithmetic.
 */

export function planCompaction(input: PlanInput): Plan | PlanFailure {
  const { items, entries, keepFirst, targetBytes } = input;
  const units = unitsOf(entries, keepFirst);
  if (units.length === 0) return { failure: 'nothing_to_shrink' };
  const lastUser = lastOfRole(entries, 'user', keepFirst);
  const cost = (i: number) => itemBytes(items[i]) + 1;
  const fixed = 1 + sum(range(0, keepFirst), cost);
  const summaryCost = input.summaryReserveBytes + 1;

  // Grow the tail from the last unit back while it fits beside the summary and the pinned input.
  let first = units.length - 1;
  const tailBytes = (from: number) => sum(range(units[from][0], items.length), cost);
  const pinBytes = (from: number) => (lastUser >= 0 && lastUser < units[from][0] ? cost(lastUser) : 0);
  const total = (from: number) => fixed + tailBytes(from) + pinBytes(from) + (hasMiddle(units, from, lastUser) ? summaryCost : 0);
  const aim = Math.min(input.aimBytes ?? targetBytes, targetBytes);
  while (first > 0) {
    const wider = first - 1;
    if (items.length - units[wider][0] > input.keepRecent) break;
    if (total(wider) > aim) break;
    first = wider;
  }

  const tailStart = units[first][0];
  const middle = range(keepFirst, tailStart).filter((i) => i !== lastUser);
  const pinned = lastUser >= keepFirst && lastUser < tailStart ? [lastUser] : [];
  const kept = [...pinned, ...range(tailStart, items.length)].map((i) => items[i]);
  const before = total(first);
  const lastUserKept = lastUser < keepFirst ? -1 : pinned.length > 0 ? 0 : pinned.length + lastUser - tailStart;
  // Cut down to the aim: the better guess at the limit (a 413 states none), with room for the next turns.
  const shrunk = shrinkKept(kept, input.dialect, before > targetBytes ? before - aim : 0, lastUserKept, input.newestWhole === true);
  if (middle.length === 0 && shrunk.cut === 0) return { failure: 'nothing_to_shrink' };
  if (before - shrunk.savedBytes > targetBytes) return { failure: 'cannot_fit' };
  if (!outweighs(middle, cost, (middle.length > 0 ? summaryCost : 0) - shrunk.savedBytes)) return { failure: 'nothing_to_shrink' };
  return { middle, pinned, tailStart, kept: shrunk.items, cut: shrunk.cut };
}

function hasMiddle(units: Array<[number, number]>, first: number, lastUser: number): boolean {
  const start = units[0][0];
  const end = units[first][0];
  return end - start > (lastUser >= start && lastUser < end ? 1 : 0);
}

/** Lazily: the middle is usually most of a multi-megabyte request and a few items already settle it. */
function outweighs(middle: number[], cost: (i: number) => number, bytes: number): boolean {
  let total = 0;
  for (const i of middle) {
    if (total > bytes) return true;
    total += cost(i);
  }
  return total > bytes;
}

function sum(indices: number[], f: (i: number) => number): number {
  let total = 0;
  for (const i of indices) total += f(i);
  return total;
}

export function range(start: number, end: number): number[] {
  return Array.from({ length: Math.max(0, end - start) }, (_, k) => start + k);
}
