import { agentConversation } from '../compaction/conversations.js';

/** The provider window the memory tests use, in request bytes. */
export const LIMIT = 60_000;

/** One agent session's request at a given turn: each turn's history starts with the previous one. */
export function sessionRequest(turns: number, extra: Record<string, unknown> = {}) {
  return {
    model: 'fake-model',
    messages: agentConversation({ turns, toolOutputBytes: 1_500, seed: 42, imageBytes: 0 }),
    ...extra,
  };
}

/** The first turn (from 10) whose request is over `limit` bytes. */
export function firstOverflow(limit = LIMIT, extra: Record<string, unknown> = {}): number {
  let n = 10;
  while (JSON.stringify(sessionRequest(n, extra)).length <= limit) n++;
  return n;
}
