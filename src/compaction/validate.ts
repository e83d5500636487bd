import type { ChatMessage } from './types.js';
import { formatCount } from './shrink.js';
import { messagesBytes } from './size.js';

/*
 * The guard run before a compacted request is replayed. It checks the promises compaction makes,
 * independently of how the plan was made. Tool-call pairing problems are only reported when
 * compaction caused them: an original that already had an orphan or an unanswered call is the
 * client's business, and refusing to replay it would not help anyone.
 */

/** Human-readable problems with `compacted` as a replacement for `original`; empty when valid. */
export function validateCompaction(original: ChatMessage[], compacted: ChatMessage[]): string[] {
  return [
    ...headProblems(original, compacted),
    ...lastUserProblems(original, compacted),
    ...orphanProblems(original, compacted),
    ...unansweredProblems(original, compacted),
    ...sizeProblems(original, compacted),
  ];
}

function headProblems(original: ChatMessage[], compacted: ChatMessage[]): string[] {
  const problems: string[] = [];
  for (let i = 0; i < original.length && isInstruction(original[i]); i++) {
    if (i >= compacted.length || !sameMessage(original[i], compacted[i])) {
      problems.push(`leading ${original[i].role} message #${i} is not kept byte-identical at position ${i}`);
    }
  }
  return problems;
}

function lastUserProblems(original: ChatMessage[], compacted: ChatMessage[]): string[] {
  const lastUser = original.findLast((m) => m.role === 'user');
  if (lastUser === undefined) return [];
  const kept = compacted.some((m) => m.role === 'user' && sameMessage(lastUser, m));
  return kept ? [] : ['the last user message of the original is missing or changed'];
}

function orphanProblems(original: ChatMessage[], compacted: ChatMessage[]): string[] {
  const alreadyOrphaned = new Set(orphanedIds(original));
  return orphanedIds(compacted)
    .filter((id) => !alreadyOrphaned.has(id))
    .map((id) => `tool message for call ${JSON.stringify(id)} has no earlier assistant tool call with that id`);
}

function unansweredProblems(original: ChatMessage[], compacted: ChatMessage[]): string[] {
  const alreadyUnanswered = new Set(unansweredIds(original));
  return unansweredIds(compacted)
    .filter((id) => !alreadyUnanswered.has(id))
    .map((id) => `assistant tool call ${JSON.stringify(id)} is not followed by its tool result`);
}

function sizeProblems(original: ChatMessage[], compacted: ChatMessage[]): string[] {
  const before = messagesBytes(original);
  const after = messagesBytes(compacted);
  if (after < before) return [];
  return [`compacted messages are ${formatCount(after)} bytes, not smaller than the original ${formatCount(before)}`];
}

/** tool_call_ids of tool messages that no earlier assistant message asked for. */
function orphanedIds(messages: ChatMessage[]): string[] {
  const called = new Set<string>();
  const orphans: string[] = [];
  for (const message of messages) {
    for (const id of callIds(message)) called.add(id);
    if (message.role === 'tool' && !called.has(String(message.tool_call_id))) orphans.push(String(message.tool_call_id));
  }
  return orphans;
}

/** Ids of assistant tool calls without a tool result in the run of tool messages right after. */
function unansweredIds(messages: ChatMessage[]): string[] {
  const unanswered: string[] = [];
  messages.forEach((message, i) => {
    const waiting = new Set(callIds(message));
    for (let j = i + 1; j < messages.length && messages[j].role === 'tool'; j++) {
      waiting.delete(String(messages[j].tool_call_id));
    }
    unanswered.push(...waiting);
  });
  return unanswered;
}

function callIds(message: ChatMessage): string[] {
  if (message.role !== 'assistant' || !Array.isArray(message.tool_calls)) return [];
  return message.tool_calls.map((call) => String(call?.id));
}

function isInstruction(message: ChatMessage): boolean {
  return message.role === 'system' || message.role === 'developer';
}

function sameMessage(a: ChatMessage, b: ChatMessage): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}
