import type { Rendered } from '../dialects/types.js';
import { jsonTextBytes, prefixWithinBytes, suffixWithinBytes } from './size.js';

/*
 * The summarizer's transcript. Sizes are JSON-escaped bytes, the way the text goes out inside a
 * call's body, so that a chunk within budget fits the call whatever the language or the quoting.
 *
 * Each turn is a header line at the margin, `[user]`, `[assistant]`, `[tool result c1]`, and its
 * content below with every line indented by two spaces. Content can therefore never start a line
 * at the margin: a tool output (a web page, a file) that contains "\n\n[user]\nDo this" shows it
 * indented, inside the tool result, and no header can be forged. Indenting rather than a random
 * nonce per turn: the same items give the same bytes, the nesting is plain to a model reading it
 * (a nonce must be explained and compared on every header), and it costs two bytes a line.
 */

/** What every line of a turn's content starts with. */
export const INDENT = '  ';
/** Every way a line can end, as a reader (or a model) sees it: CRLF first, so that it counts once. */
const LINE_BREAK = /\r\n|[\n\r\v\f\x85\u2028\u2029]/g;
/** The longest header text, and what is left out of one: line breaks and brackets could forge a header. */
const HEADER_MAX_CHARS = 200;
const NOT_IN_HEADER = /[\x00-\x1f\x7f\x85\u2028\u2029[\]]/g;

/**
 * Renders items for the summarizer: who said what, tool calls with their arguments, tool results.
 * Any single item is capped so that one huge tool output cannot crowd the rest of its chunk out.
 */
export function renderTranscript(items: Rendered[], perItemBytes: number): string[] {
  return items.map((item) => renderItem(item, perItemBytes));
}

/** One item of the transcript (see renderTranscript). */
export function renderItem(item: Rendered, maxBytes: number): string {
  const parts: string[] = [];
  if (item.text) parts.push(item.text);
  for (const call of item.calls) parts.push(`-> calls ${call.name}(${call.args}) [${call.id}]`);
  return renderBlock(item.who, parts.join('\n'), maxBytes);
}

/**
 * One turn of the transcript within `maxBytes` escaped bytes: `[header]` at the margin, then the
 * content indented. Content too long is shown by its ends, with a marker (indented too) for
 * what was left out; only those ends are ever copied, however long the content is.
 */
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

/** `content` with every line indented, within `max` escaped bytes. */
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

/**
 * `text` within `max` escaped bytes: its start and end, with a marker for what was left out
 * (`omitted` characters more than the ones cut here). The marker's lines start with `margin`,
 * and so does the line after it: cut out of indented content, the result is still indented.
 */
export function clipBytes(text: string, max: number, margin = '', omitted = 0): string {
  const bytes = jsonTextBytes(text);
  if (bytes <= max && omitted === 0) return text;
  const marker = (n: number) => `\n${margin}[... ${n} characters left out ...]\n${margin}`;
  const half = Math.max(0, Math.floor((max - jsonTextBytes(marker(text.length + omitted))) / 2));
  const head = prefixWithinBytes(text, half);
  const tail = Math.min(suffixWithinBytes(text, half), text.length - head);
  return `${text.slice(0, head)}${marker(text.length - head - tail + omitted)}${text.slice(text.length - tail)}`;
}

/** Groups rendered messages into chunks of at most `maxBytes` each (a message is never split); `sizes` as `entryBytes` gives them. */
export function chunkTranscript(rendered: string[], maxBytes: number, sizes: readonly number[] = rendered.map(entryBytes)): string[] {
  return chunkSizes(sizes, maxBytes).map(([from, to]) => rendered.slice(from, to).join(SEPARATOR));
}

const SEPARATOR = '\n\n';

/** What an entry adds to a chunk: its escaped bytes and a separator. */
export function entryBytes(entry: string): number {
  return jsonTextBytes(entry) + jsonTextBytes(SEPARATOR);
}

/**
 * The chunks of entries of these sizes, as [from, to) ranges, filled greedily in order: none over
 * `maxBytes` but an entry larger on its own. Greedy is the fewest chunks possible, from either end.
 */
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
