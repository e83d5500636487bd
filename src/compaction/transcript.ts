import type { ChatMessage } from './types.js';

/**
 * Renders messages as plain text for the summarizer: who said what, tool calls with their
 * arguments, tool results. Images become a marker; any single message is capped so that one
 * huge tool output cannot crowd the rest of its chunk out.
 */
export function renderTranscript(messages: ChatMessage[], perMessageChars: number): string[] {
  return messages.map((m) => clip(renderMessage(m), perMessageChars));
}

function renderMessage(m: ChatMessage): string {
  const who = m.name ? `${m.role} (${m.name})` : m.role;
  const parts: string[] = [];
  const text = contentText(m.content);
  if (m.role === 'tool') return `[tool result${m.tool_call_id ? ` ${m.tool_call_id}` : ''}]\n${text}`;
  if (text) parts.push(text);
  for (const call of m.tool_calls ?? []) {
    parts.push(`-> calls ${call.function?.name ?? 'tool'}(${call.function?.arguments ?? ''}) [${call.id}]`);
  }
  return `[${who}]\n${parts.join('\n')}`;
}

export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return content == null ? '' : JSON.stringify(content);
  return content
    .map((part) => {
      if (typeof part === 'string') return part;
      if (part && typeof part === 'object') {
        const p = part as Record<string, unknown>;
        if (typeof p.text === 'string') return p.text;
        if (typeof p.type === 'string' && /image|audio|file/.test(p.type)) return `[${p.type}]`;
        if (typeof p.refusal === 'string') return p.refusal;
      }
      return '';
    })
    .filter(Boolean)
    .join('\n');
}

function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  const keep = Math.floor((max - 60) / 2);
  return `${text.slice(0, keep)}\n[... ${text.length - 2 * keep} characters left out ...]\n${text.slice(-keep)}`;
}

/** Groups rendered messages into chunks of at most `maxChars` each (a message is never split). */
export function chunkTranscript(rendered: string[], maxChars: number): string[] {
  const chunks: string[] = [];
  let current: string[] = [];
  let size = 0;
  for (const entry of rendered) {
    if (size + entry.length + 2 > maxChars && current.length > 0) {
      chunks.push(current.join('\n\n'));
      current = [];
      size = 0;
    }
    current.push(entry);
    size += entry.length + 2;
  }
  if (current.length > 0) chunks.push(current.join('\n\n'));
  return chunks;
}
