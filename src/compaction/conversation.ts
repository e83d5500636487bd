import type { Entry } from '../dialects/types.js';

/*
 * The head is kept byte-identical (the provider's prompt-cache prefix). A unit is the smallest run of
 * items kept or dropped on its own: a tool call with every result that answers it.
 */

export function headEnd(entries: readonly Entry[]): number {
  let i = 0;
  while (i < entries.length && entries[i].role === 'instruction') i++;
  return i;
}

/** The last item is never part of the opening: there is always something after the kept prefix. */
export function openingEnd(entries: readonly Entry[]): number {
  let i = headEnd(entries);
  while (i < entries.length - 1 && (entries[i].role === 'user' || entries[i].role === 'instruction')) i++;
  return i;
}

export function unitsOf(entries: readonly Entry[], from: number): Array<[number, number]> {
  const units: Array<[number, number]> = [];
  let start = from;
  while (start < entries.length) {
    const end = unitEnd(entries, start);
    units.push([start, end]);
    start = end;
  }
  return units;
}

function unitEnd(entries: readonly Entry[], start: number): number {
  const open = new Set<string>();
  let i = start;
  for (;;) {
    const entry = entries[i];
    for (const id of entry.calls) open.add(id);
    for (const id of entry.answers) open.delete(id);
    i++;
    if (i >= entries.length) return i;
    if (entry.joinsNext) continue;
    // While a call is unanswered, the calls and results after it belong to it (parallel calls
    // come as several call items, then their results).
    const next = entries[i];
    if (open.size > 0 && (next.answers.length > 0 || next.calls.length > 0 || next.role === 'tool')) continue;
    return i;
  }
}

export function lastOfRole(entries: readonly Entry[], role: Entry['role'], from = 0): number {
  for (let i = entries.length - 1; i >= from; i--) if (entries[i].role === role) return i;
  return -1;
}
