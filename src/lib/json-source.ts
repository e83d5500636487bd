/*
 * Each top-level field and each top-level array element is parsed on its own with its source text remembered, so a derived request
 * copies the text of everything the rescue did not change: `"seed": 12345678901234567890` and `1.0` go upstream as written, a kept
 * item costs a slice instead of a JSON.stringify, and a huge body is parsed with pauses between elements.
 */

import { timeSlice } from './time-slice.js';

interface SourceField {
  key: string;
  text: string;
  value: unknown;
}

/** Source text of the parsed top-level objects, and of every object element of their top-level arrays. */
const fields = new WeakMap<object, Map<string, SourceField>>();
const elements = new WeakMap<object, string>();

export function sourceText(item: unknown): string | undefined {
  return typeof item === 'object' && item !== null ? elements.get(item) : undefined;
}

/** What `parseObject` gives for a top-level array longer than its `maxItems`: read no further. */
export const TOO_MANY_ITEMS = Symbol('too many items');

/**
 * Same result as JSON.parse (duplicate keys: the last wins; `__proto__` an own field); null when not an object or deeper than `maxDepth`
 * (root counts 1). A top-level array over `maxItems` ends the read: TOO_MANY_ITEMS (a million messages are not built to be refused).
 */
export async function parseObject(
  text: string,
  maxDepth: number,
  maxItems = Number.POSITIVE_INFINITY,
): Promise<Record<string, unknown> | null | typeof TOO_MANY_ITEMS> {
  const slice = timeSlice();
  const reader = readObject(text, maxDepth, slice.due, maxItems);
  try {
    for (let step = reader.next(); ; step = reader.next()) {
      if (step.done) return step.value;
      await slice.pause();
    }
  } catch (err) {
    if (err instanceof SyntaxError) return null;
    throw err;
  }
}

/** `parseObject` in one piece, for a body small enough not to need pauses. */
export function parseObjectNow(text: string, maxDepth: number): Record<string, unknown> | null {
  const reader = readObject(text, maxDepth, () => false, Number.POSITIVE_INFINITY);
  try {
    let step = reader.next();
    while (!step.done) step = reader.next();
    return step.value === TOO_MANY_ITEMS ? null : step.value;
  } catch (err) {
    if (err instanceof SyntaxError) return null;
    throw err;
  }
}

function* readObject(
  text: string,
  maxDepth: number,
  due: () => boolean,
  maxItems: number,
): Generator<void, Record<string, unknown> | null | typeof TOO_MANY_ITEMS> {
  let i = skipSpace(text, 0);
  if (text.charCodeAt(i) !== OPEN_OBJECT) return null;
  const root: Record<string, unknown> = {};
  const source = new Map<string, SourceField>();
  i = skipSpace(text, i + 1);
  if (text.charCodeAt(i) === CLOSE_OBJECT) return skipSpace(text, i + 1) === text.length ? root : null;
  for (;;) {
    if (text.charCodeAt(i) !== QUOTE) return null;
    const keyEnd = stringEnd(text, i);
    if (keyEnd < 0) return null;
    const keyText = text.slice(i, keyEnd);
    const key = JSON.parse(keyText) as string;
    i = skipSpace(text, keyEnd);
    if (text.charCodeAt(i) !== COLON) return null;
    const start = skipSpace(text, i + 1);
    let value: unknown;
    let end: number;
    if (text.charCodeAt(start) === OPEN_ARRAY) {
      const read = yield* readArray(text, start, maxDepth, due, maxItems);
      if (read === TOO_MANY_ITEMS || !read) return read;
      [value, end] = read;
    } else {
      end = valueEnd(text, start, 1, maxDepth);
      if (end < 0) return null;
      value = JSON.parse(text.slice(start, end));
    }
    // An own field whatever its name, as JSON.parse makes it (`__proto__` too).
    Object.defineProperty(root, key, { value, enumerable: true, writable: true, configurable: true });
    source.set(key, { key: keyText, text: text.slice(start, end), value });
    i = skipSpace(text, end);
    const next = text.charCodeAt(i);
    if (next === COMMA) {
      i = skipSpace(text, i + 1);
      continue;
    }
    if (next !== CLOSE_OBJECT || skipSpace(text, i + 1) !== text.length) return null;
    fields.set(root, source);
    return root;
  }
}

function* readArray(
  text: string,
  start: number,
  maxDepth: number,
  due: () => boolean,
  maxItems: number,
): Generator<void, [unknown[], number] | null | typeof TOO_MANY_ITEMS> {
  if (maxDepth < 2) return null;
  const out: unknown[] = [];
  let i = skipSpace(text, start + 1);
  if (text.charCodeAt(i) === CLOSE_ARRAY) return [out, i + 1];
  for (;;) {
    const end = valueEnd(text, i, 2, maxDepth);
    if (end < 0) return null;
    const piece = text.slice(i, end);
    const element: unknown = JSON.parse(piece);
    if (typeof element === 'object' && element !== null) elements.set(element, piece);
    if (out.push(element) > maxItems) return TOO_MANY_ITEMS;
    i = skipSpace(text, end);
    const next = text.charCodeAt(i);
    if (next === CLOSE_ARRAY) return [out, i + 1];
    if (next !== COMMA) return null;
    i = skipSpace(text, i + 1);
    if (due()) yield;
  }
}

/**
 * `{ ...request, ...changes }` as JSON text: a value still the one parsed keeps its text as sent; undefined values are left out,
 * as JSON.stringify does.
 */
export function writeDerived(request: Record<string, unknown>, changes: Record<string, unknown> = {}): string {
  const source = fields.get(request);
  const parts: string[] = [];
  for (const key of Object.keys({ ...request, ...changes })) {
    const value = Object.hasOwn(changes, key) ? changes[key] : request[key];
    if (value === undefined || typeof value === 'function' || typeof value === 'symbol') continue;
    const field = source?.get(key);
    // An array is written element by element even when it is the one parsed: it may have been edited in place.
    const same = field !== undefined && field.value === value && !Array.isArray(value);
    parts.push(`${field?.key ?? JSON.stringify(key)}:${same ? field.text : valueText(value)}`);
  }
  return `{${parts.join(',')}}`;
}

/** A request derived from a parsed one (`{ ...request, ...changes }`) that `writeDerived` still writes from its source. */
export function derive(request: Record<string, unknown>, changes: Record<string, unknown>): Record<string, unknown> {
  const derived = { ...request, ...changes };
  const source = fields.get(request);
  if (source) fields.set(derived, source);
  return derived;
}

function valueText(value: unknown): string {
  if (!Array.isArray(value)) return JSON.stringify(value) ?? 'null';
  const parts = value.map((element) => sourceText(element) ?? JSON.stringify(element) ?? 'null');
  return `[${parts.join(',')}]`;
}

/** The JSON bytes the scanners here and in json-shape.ts read. */
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const COMMA = 0x2c;
export const COLON = 0x3a;
export const OPEN_OBJECT = 0x7b;
export const CLOSE_OBJECT = 0x7d;
export const OPEN_ARRAY = 0x5b;
export const CLOSE_ARRAY = 0x5d;

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** Just past the closing quote of the string that opens at `i`; -1 when it never closes. */
function stringEnd(text: string, i: number): number {
  let from = i + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote < 0) return -1;
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

/**
 * Just past the value at `i`, by brackets and strings alone (JSON.parse of the piece checks the rest); -1 if unended or past
 * `maxDepth`.
 */
function valueEnd(text: string, i: number, depth: number, maxDepth: number): number {
  const first = text.charCodeAt(i);
  if (first === QUOTE) return stringEnd(text, i);
  if (first !== OPEN_OBJECT && first !== OPEN_ARRAY) {
    let k = i;
    while (k < text.length) {
      const code = text.charCodeAt(k);
      if (code === COMMA || code === CLOSE_OBJECT || code === CLOSE_ARRAY || isSpace(code)) break;
      k++;
    }
    return k;
  }
  let open = 0;
  for (let k = i; k < text.length;) {
    const code = text.charCodeAt(k);
    if (code === QUOTE) {
      k = stringEnd(text, k);
      if (k < 0) return -1;
      continue;
    }
    if (code === OPEN_OBJECT || code === OPEN_ARRAY) {
      if (depth + ++open > maxDepth) return -1;
    } else if (code === CLOSE_OBJECT || code === CLOSE_ARRAY) {
      if (--open === 0) return k + 1;
    }
    k++;
  }
  return -1;
}
