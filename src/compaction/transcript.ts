import type { Rendered } from '../dialects/types.js';

/**
 * Renders items as plain text for the summarizer: who said what, tool calls with their arguments,
 * tool results. Any single item is capped so that one huge tool output cannot crowd the rest of
 * its chunk out.
 */
export function renderTranscript(items: Rendered[], perItemChars: number): string[] {
  return items.map((item) => clip(renderItem(item), perItemChars));
}

function renderItem(item: Rendered): string {
  const parts: string[] = [];
  if (item.text) parts.push(item.text);
  for (const call of item.calls) parts.push(`-> calls ${call.name}(${call.args}) [${call.id}]`);
  return `[${item.who}]\n${parts.join('\n')}`;
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
