import type { Rendered } from '../dialects/types.js';
import { jsonTextBytes, prefixWithinBytes, suffixWithinBytes } from './size.js';

/*
 * Sizes are JSON-escaped bytes, as the text goes out inside a call's body. Each turn's content is
 * indented under a header at the margin, so a tool output containing "\n\n[user]\nDo this" can never
 * forge a header. Indenting rather than a nonce per turn: the same items give the same bytes, and the
 * nesting is plain to a model reading it.
 */

export const INDENT = '  ';
/** As a reader (or a model) sees it: CRLF first, so that it counts once. */
const LINE_BREAK = /\r\n|[\n\r\v\f\x85\u2028\u2029]/g;
/** Line breaks and brackets are left out of a header: they could forge one. */
const HEADER_MAX_CHARS = 200;
const NOT_IN_HEADER = /[\x00-\x1f\x7f\x85\u2028\u2029[\]]/g;

/** Each item capped: one huge tool output cannot crowd the rest of its chunk out. */
export function renderTranscript(items: Rendered[], perItemBytes: number): string[] {
  return items.map((item) => renderItem(item, perItemBytes));
}

export function renderItem(item: Rendered, maxBytes: number): string {
  const parts: string[] = [];
  if (item.text) parts.push(item.text);
  for (const call of item.calls) parts.push(`-> calls ${call.name}(${call.args}) [${call.id}]`);
  return renderBlock(item.who, parts.join('\n'), maxBytes);
}

/** Content too long is shown by its ends; only those ends are ever copied, however long the content is. */
export function renderBlock(header: string, content: string, maxBytes: number): string {
  const head = `[${headerText(header)}]`;
  if (!content) return head;
  const room = Math.max(0, maxBytes - jsonTextBytes(head) - jsonTextBytes('\n'));
  return `${head}\n${indentedWithin(content, room)}`;
}

function headerText(who: string): string {
  const text = who.replace(NOT_IN_HEADER, (c) => (c === '[' ? '(' : c === ']' ? ')' : ' '));
  return text.length > HEADER_MAX_CHARS ? `${text.slice(0, HEADER_MAX_CHARS)}…` : text;
}

function indentedWithin(content: string, max: number): string {
  const head = prefixWithinBytes(content, max);
  const tail = suffixWithinBytes(content, max);
  // At most twice `max`: indented whole, then clipped.
  if (head + tail >= content.length) return clipBytes(indent(content), max, INDENT);
  // Longer: the clip keeps less than `max` of either end, so the seam between them is always left out.
  const ends = `${indent(content.slice(0, head))}${indent(content.slice(content.length - tail))}`;
  return clipBytes(ends, max, INDENT, content.length - head - tail);
}

function indent(text: string): string {
  return INDENT + text.replace(LINE_BREAK, `$&${INDENT}`);
}

/** The marker's lines and the one after it start with `margin`: cut out of indented content, it stays indented. */
export function clipBytes(text: string, max: number, margin = '', omitted = 0): string {
  const bytes = jsonTextBytes(text);
  if (bytes <= max && omitted === 0) return text;
  const marker = (n: number) => `\n${margin}[... ${n} characters left out ...]\n${margin}`;
  const half = Math.max(0, Math.floor((max - jsonTextBytes(marker(text.length + omitted))) / 2));
  const head = prefixWithinBytes(text, half);
  const tail = Math.min(suffixWithinBytes(text, half), text.length - head);
  return `${text.slice(0, head)}${marker(text.length - head - tail + omitted)}${text.slice(text.length - tail)}`;
}

/** A message is never split. */
export function chunkTranscript(rendered: string[], maxBytes: number, sizes: readonly number[] = rendered.map(entryBytes)): string[] {
  return chunkSizes(sizes, maxBytes).map(([from, to]) => rendered.slice(from, to).join(SEPARATOR));
}

const SEPARATOR = '\n\n';

export function entryBytes(entry: string): number {
  return jsonTextBytes(entry) + jsonTextBytes(SEPARATOR);
}

/** Greedy is the fewest chunks possible, from either end. */
function chunkSizes(sizes: readonly number[], maxBytes: number): Array<[number, number]> {
  const chunks: Array<[number, number]> = [];
  let from = 0;
  let size = 0;
  sizes.forEach((bytes, i) => {
    if (size + bytes > maxBytes && i > from) {
      chunks.push([from, i]);
      from = i;
      size = 0;
    }
    size += bytes;
  });
  if (sizes.length > from) chunks.push([from, sizes.length]);
  return chunks;
}
