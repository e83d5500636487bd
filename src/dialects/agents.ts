import type { AgentCompaction } from './types.js';

/*
 * Agents that send their own compaction call: the agent asks its model to summarise the
 * conversation, with the whole history. Each dialect lists those of its API's agents.
 */

/** Codex marks it in its turn metadata: `x-codex-turn-metadata: {"request_kind":"compaction",...}`. */
export const CODEX_COMPACTION: AgentCompaction = {
  agent: 'Codex',
  is: (headers) => codexRequestKind(headers['x-codex-turn-metadata']) === 'compaction',
};

/** The opening words of Claude Code's compaction prompt (its full and partial forms alike). */
const CLAUDE_CODE_SUMMARY_INSTRUCTION = 'Your task is to create a detailed summary of the conversation so far';

/** Claude Code's is a Messages call whose newest turn is its summary instruction. */
export const CLAUDE_CODE_COMPACTION: AgentCompaction = {
  agent: 'Claude Code',
  is: (_headers, json) => json !== null && newestUserText(json).includes(CLAUDE_CODE_SUMMARY_INSTRUCTION),
};

function codexRequestKind(header: string | string[] | undefined): string | undefined {
  const text = Array.isArray(header) ? header[0] : header;
  if (!text || !text.includes('request_kind')) return undefined;
  try {
    const kind = (JSON.parse(text) as { request_kind?: unknown }).request_kind;
    return typeof kind === 'string' ? kind : undefined;
  } catch {
    return undefined;
  }
}

/** The text of a Messages request's newest user turn. */
function newestUserText(json: Record<string, unknown>): string {
  const messages = Array.isArray(json.messages) ? json.messages : [];
  const last = messages.at(-1) as { role?: unknown; content?: unknown } | undefined;
  if (!last || last.role !== 'user') return '';
  if (typeof last.content === 'string') return last.content;
  if (!Array.isArray(last.content)) return '';
  return last.content
    .map((block: { type?: unknown; text?: unknown }) => (block?.type === 'text' && typeof block.text === 'string' ? block.text : ''))
    .join('\n');
}
