import type { Dialect, Entry } from '../dialects/types.js';
import { headEnd } from './conversation.js';
import { formatCount } from './shrink.js';
import { itemsBytes } from './size.js';

/*
 * The guard run before a compacted request is sent. It checks the promises compaction makes,
 * independently of how the plan was made, for any API. Tool-call pairing and wire problems are
 * only reported when compaction caused them: an original that already had an orphan is the
 * client's business, and refusing to replay it would not help anyone.
 */

type Checked = Pick<Dialect, 'describe' | 'problems'>;

/** Human-readable problems with `compacted` as a replacement for `original`; empty when valid. */
export function validateCompaction(dialect: Checked, original: readonly unknown[], compacted: readonly unknown[]): string[] {
  const before = original.map((item) => dialect.describe(item));
  const after = compacted.map((item) => dialect.describe(item));
  return [
    ...headProblems(original, compacted, headEnd(before)),
    ...lastUserProblems(original, before, compacted, after),
    ...newOnly(orphans(before), orphans(after), (id) => `a tool result for call ${JSON.stringify(id)} has no earlier call with that id`),
    ...newOnly(unanswered(before), unanswered(after), (id) => `tool call ${JSON.stringify(id)} is not followed by its result`),
    ...newOnly(dialect.problems([...original]), dialect.problems([...compacted]), (p) => p),
    ...sizeProblems(original, compacted),
  ];
}

function headProblems(original: readonly unknown[], compacted: readonly unknown[], end: number): string[] {
  const problems: string[] = [];
  for (let i = 0; i < end; i++) {
    if (i >= compacted.length || !same(original[i], compacted[i])) {
      problems.push(`leading instruction #${i} is not kept byte-identical at position ${i}`);
    }
  }
  return problems;
}

function lastUserProblems(original: readonly unknown[], before: Entry[], compacted: readonly unknown[], after: Entry[]): string[] {
  const index = before.findLastIndex((e) => e.role === 'user');
  if (index < 0) return [];
  const kept = compacted.some((item, i) => after[i].role === 'user' && same(original[index], item));
  return kept ? [] : ['the last user input of the original is missing or changed'];
}

function sizeProblems(original: readonly unknown[], compacted: readonly unknown[]): string[] {
  const before = itemsBytes(original);
  const after = itemsBytes(compacted);
  if (after < before) return [];
  return [`the compacted conversation is ${formatCount(after)} bytes, not smaller than the original ${formatCount(before)}`];
}

function newOnly(before: string[], after: string[], say: (x: string) => string): string[] {
  const known = new Set(before);
  return after.filter((x) => !known.has(x)).map(say);
}

/** Ids answered by an item with no earlier call for them. */
function orphans(entries: Entry[]): string[] {
  const called = new Set<string>();
  const out: string[] = [];
  for (const entry of entries) {
    for (const id of entry.calls) called.add(id);
    for (const id of entry.answers) if (!called.has(id)) out.push(id);
  }
  return out;
}

/** Ids called with no answer later in the conversation. */
function unanswered(entries: Entry[]): string[] {
  const open = new Map<string, number>();
  for (const entry of entries) {
    for (const id of entry.calls) open.set(id, (open.get(id) ?? 0) + 1);
    for (const id of entry.answers) open.delete(id);
  }
  return [...open.keys()];
}

function same(a: unknown, b: unknown): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}
