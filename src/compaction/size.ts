import { sourceText } from '../lib/json-source.js';

export const SUMMARY_BYTES_PER_TOKEN = 4;

export function jsonBytes(value: unknown): number {
  const json: string | undefined = JSON.stringify(value);
  return json === undefined ? 0 : Buffer.byteLength(json, 'utf8');
}

export function arrayBytes(elementBytes: readonly number[]): number {
  let total = 2 + Math.max(0, elementBytes.length - 1);
  for (const bytes of elementBytes) total += bytes;
  return total;
}

/** Safe to cache: compaction never mutates an item (a changed one is a new object). */
const measured = new WeakMap<object, number>();

export function itemBytes(item: unknown): number {
  if (typeof item !== 'object' || item === null) return jsonBytes(item);
  let bytes = measured.get(item);
  if (bytes === undefined) {
    // An item parsed from the request goes upstream as its source text (json-source.ts).
    const source = sourceText(item);
    bytes = source === undefined ? jsonBytes(item) : Buffer.byteLength(source, 'utf8');
    measured.set(item, bytes);
  }
  return bytes;
}

export function itemsBytes(items: readonly unknown[]): number {
  return arrayBytes(items.map(itemBytes));
}

/*
 * Byte counting inside one JSON string, without building it. JSON.stringify writes `"` and `\`
 * and the five short control escapes as two bytes, other controls and lone surrogates as
 * `\uXXXX` (six), and everything else as its UTF-8 encoding. A surrogate pair is one code point
 * (four bytes) and is never split by the functions below.
 */

const SHORT_ESCAPES = new Set([0x08, 0x09, 0x0a, 0x0c, 0x0d]);

function unitBytes(code: number): number {
  if (code === 0x22 || code === 0x5c) return 2;
  if (code < 0x20) return SHORT_ESCAPES.has(code) ? 2 : 6;
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  return 3;
}

const isHigh = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;
const isLow = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;

function stepForward(text: string, i: number, end = text.length): [number, number] {
  const code = text.charCodeAt(i);
  if (isHigh(code) && i + 1 < end && isLow(text.charCodeAt(i + 1))) return [2, 4];
  if (isHigh(code) || isLow(code)) return [1, 6];
  return [1, unitBytes(code)];
}

function stepBackward(text: string, end: number): [number, number] {
  const code = text.charCodeAt(end - 1);
  if (isLow(code) && end >= 2 && isHigh(text.charCodeAt(end - 2))) return [2, 4];
  if (isHigh(code) || isLow(code)) return [1, 6];
  return [1, unitBytes(code)];
}

export function jsonTextBytes(text: string, start = 0, end = text.length): number {
  let bytes = 0;
  for (let i = start; i < end;) {
    const [width, size] = stepForward(text, i, end);
    i += width;
    bytes += size;
  }
  return bytes;
}

/** Longest prefix length (in code units) whose escaped size is at most `maxBytes`. */
export function prefixWithinBytes(text: string, maxBytes: number): number {
  let i = 0;
  let bytes = 0;
  while (i < text.length) {
    const [width, size] = stepForward(text, i);
    if (bytes + size > maxBytes) break;
    i += width;
    bytes += size;
  }
  return i;
}

/** Longest suffix length (in code units) whose escaped size is at most `maxBytes`. */
export function suffixWithinBytes(text: string, maxBytes: number): number {
  let end = text.length;
  let bytes = 0;
  while (end > 0) {
    const [width, size] = stepBackward(text, end);
    if (bytes + size > maxBytes) break;
    end -= width;
    bytes += size;
  }
  return text.length - end;
}
