import type { Rendered } from '../dialects/types.js';
import { jsonTextBytes, prefixWithinBytes, suffixWithinBytes } from './size.js';

/*
 * The summarizer's transcript. Sizes are JSON-escaped bytes, the way the text goes out inside a
 * call's body, so that a chunk within budget fits the call whatever the language or the quoting.
 */

/**
 * Renders items as plain text for the summarizer: who said what, tool calls with their arguments,
 * tool results. Any single item is capped so that one huge tool output cannot crowd the rest of
 * its chunk out.
 */
export function renderTranscript(items: Rendered[], perItemBytes: number): string[] {
  return items.map((item) => clipBytes(renderItem(item), perItemBytes));
}

function renderItem(item: Rendered): string {
  const parts: string[] = [];
  if (item.text) parts.push(item.text);
  for (const call of item.calls) parts.push(`-> calls ${call.name}(${call.args}) [${call.id}]`);
  return `[${item.who}]\n${parts.join('\n')}`;
}

/** `text` within `max` escaped bytes: its start and end, with a marker for what was left out. */
export function clipBytes(text: string, max: number): string {
  const bytes = jsonTextBytes(text);
  if (bytes <= max) return text;
  const marker = (n: number) => `\n[... ${n} characters left out ...]\n`;
  const half = Math.max(0, Math.floor((max - jsonTextBytes(marker(text.length))) / 2));
  const head = prefixWithinBytes(text, half);
  const tail = Math.min(suffixWithinBytes(text, half), text.length - head);
  return `${text.slice(0, head)}${marker(text.length - head - tail)}${text.slice(text.length - tail)}`;
}

/** Groups rendered messages into chunks of at most `maxBytes` each (a message is never split). */
export function chunkTranscript(rendered: string[], maxBytes: number): string[] {
  const chunks: string[] = [];
  let current: string[] = [];
  let size = 0;
  for (const entry of rendered) {
    const bytes = jsonTextBytes(entry) + 4;
    if (size + bytes > maxBytes && current.length > 0) {
      chunks.push(current.join('\n\n'));
      current = [];
      size = 0;
    }
    current.push(entry);
    size += bytes;
  }
  if (current.length > 0) chunks.push(current.join('\n\n'));
  return chunks;
}
