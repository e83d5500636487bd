import type { RescueContext } from './context.js';

/*
 * An agent's own compaction call: the agent asks its model to summarise the conversation, with
 * the whole history. Codex marks it in its turn metadata (`request_kind: "compaction"`); Claude
 * Code's is a Messages call whose newest turn is its summary instruction. Such a call is the one
 * most likely to overflow, and what it carries is about to be replaced by the agent's own summary:
 * the gateway makes it fit without a summary of its own (masking, then the deterministic digest,
 * so the agent's model summarises text that is still there), and remembers nothing of it.
 */

/** The opening words of Claude Code's compaction prompt (its full and partial forms alike). */
const CLAUDE_CODE_SUMMARY_INSTRUCTION = 'Your task is to create a detailed summary of the conversation so far';

/** Whether the request is an agent's own compaction call, by its headers, or by its parsed body when that is at hand. */
export function isAgentCompaction(
  ctx: Pick<RescueContext, 'clientHeaders' | 'dialect' | 'incoming'>,
  json: Record<string, unknown> | null = null,
): boolean {
  if (codexRequestKind(ctx.clientHeaders['x-codex-turn-metadata']) === 'compaction') return true;
  return ctx.dialect.api === 'messages' && json !== null && newestUserText(json).includes(CLAUDE_CODE_SUMMARY_INSTRUCTION);
}

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
