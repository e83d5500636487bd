import type { ChatMessage, Plan, PlanFailure, PlanInput } from './types.js';
import { shrinkTail } from './shrink.js';
import { arrayBytes, messageBytes } from './size.js';

/*
 * Deciding what survives compaction. Regions, in the original order:
 *
 *   head    leading system/developer messages, kept as the very same objects (prompt cache prefix)
 *   middle  condensed into one summary
 *   pinned  the last user message, when it falls before the tail
 *   tail    the last `keepRecent` messages, widened so it never starts with a tool result
 *
 * Kept messages are measured once each; everything after that is arithmetic on those numbers.
 * The summary counts as `summaryReserveBytes` (its whole JSON object) plus one comma.
 */

interface Regions {
  headEnd: number;
  tailStart: number;
  lastUser: number;
}

/** What to keep, condense and shrink so that the request fits `targetBytes`; or why it cannot. */
export function planCompaction(input: PlanInput): Plan | PlanFailure {
  const { messages, targetBytes } = input;
  const { headEnd, tailStart, lastUser } = findRegions(messages, input.keepRecent, input.keepFirst);
  const isPinned = lastUser >= headEnd && lastUser < tailStart;
  const middle = range(headEnd, tailStart).filter((i) => i !== lastUser);
  const kept = [...range(0, headEnd), ...(isPinned ? [lastUser] : []), ...range(tailStart, messages.length)];
  const summaryCost = middle.length > 0 ? input.summaryReserveBytes + 1 : 0;

  const before = arrayBytes(kept.map((i) => messageBytes(messages[i]))) + summaryCost;
  const shrunk = shrinkTail(messages.slice(tailStart), lastUser - tailStart, before - targetBytes);
  const after = before - shrunk.savedBytes;

  const changedTail = shrunk.shrunkContents + shrunk.replacedImages > 0;
  if (middle.length === 0 && !changedTail) return { failure: 'nothing_to_shrink' };
  if (after > targetBytes) return { failure: 'cannot_fit' };
  if (!outweighs(messages, middle, summaryCost - shrunk.savedBytes)) return { failure: 'nothing_to_shrink' };
  return {
    head: messages.slice(0, headEnd),
    middle: middle.map((i) => messages[i]),
    pinned: isPinned ? [messages[lastUser]] : [],
    tail: shrunk.tail,
    shrunkContents: shrunk.shrunkContents,
    replacedImages: shrunk.replacedImages,
  };
}

/**
 * Whether the middle messages, each with its comma, take more than `bytes`: exactly the condition
 * for the compacted array to be smaller than the input. Measured lazily because the middle is
 * usually most of a multi-megabyte request and a few messages already settle it.
 */
function outweighs(messages: ChatMessage[], middle: number[], bytes: number): boolean {
  let total = 0;
  for (const i of middle) {
    if (total > bytes) return true;
    total += messageBytes(messages[i]) + 1;
  }
  return total > bytes;
}

/** The compacted messages: `[...head, summary?, ...pinned, ...tail]`. */
export function assemble(plan: Plan, summary: ChatMessage | null): ChatMessage[] {
  return [...plan.head, ...(summary ? [summary] : []), ...plan.pinned, ...plan.tail];
}

function findRegions(messages: ChatMessage[], keepRecent: number, keepFirst?: number): Regions {
  const headEnd = keepFirst ?? leadingInstructionsEnd(messages);
  const keep = Number.isFinite(keepRecent) ? Math.max(0, Math.floor(keepRecent)) : 0;
  let tailStart = Math.max(headEnd, messages.length - keep);
  // A tool result must stay right after the assistant message that called it, so a tail
  // starting inside a run of tool results grows back to that assistant message.
  while (tailStart > headEnd && tailStart < messages.length && isToolResult(messages[tailStart])) tailStart--;
  return { headEnd, tailStart, lastUser: lastIndexOfRole(messages, 'user') };
}

/** `function` is the legacy (pre-tool_calls) form of a tool result, paired the same way. */
function isToolResult(message: ChatMessage): boolean {
  return message.role === 'tool' || message.role === 'function';
}

/** How many leading system/developer messages there are: the prompt-cache prefix. */
export function leadingInstructionsEnd(messages: ChatMessage[]): number {
  let i = 0;
  while (i < messages.length && (messages[i].role === 'system' || messages[i].role === 'developer')) i++;
  return i;
}

function lastIndexOfRole(messages: ChatMessage[], role: string): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].role === role) return i;
  return -1;
}

function range(start: number, end: number): number[] {
  return Array.from({ length: Math.max(0, end - start) }, (_, k) => start + k);
}
