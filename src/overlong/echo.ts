/**
 * A provider that refuses a value often quotes it back ("Invalid value: '<the client's role string>'"), so a client can make an error
 * say anything ("maximum context length is 40 tokens"): no echo may make a verdict or state a limit. An echo is a request string value
 * found in the error, whole (MIN_ECHO_CHARS or more; shorter only inside quotes), or a prefix the text ends with an ellipsis or the quote
 * opened before it, or a suffix after an ellipsis (pydantic's "first...last"). Never a value's middle: a person who pasted an earlier
 * error into the conversation must not lose the rescue of the next real one. Matching is on folded text (fold.ts).
 */
import { FoldedEnd, FoldedValue, foldedReadings } from './fold.js';

/** The shortest value found unquoted: every provider sentence that decides something is longer. */
export const MIN_ECHO_CHARS = 16;
/** Echoes one error may hold and still be judged: an error quotes a handful of values, and one that quotes more is the request's own text. */
const MAX_ECHOES = 64;
/** Places one value's first characters are looked for in the text: repetitive text cannot make it quadratic. */
const MAX_PLACES = 8;

const QUOTES = new Set(["'", '"', '`']);
const SHORT_QUOTED = /(['"`])([^'"`\n]{1,15})\1/g;

/** Null past MAX_ECHOES. No recursion (bodies nest deeply), no bound but the body's (a bound would be a place to hide a value). */
export function echoesIn(text: string, request: unknown): string[] | null {
  if (text.length < 3 || request === null || typeof request !== 'object') return [];
  const readings = foldedReadings(text).map((folded) => ({ folded, index: new TextIndex(folded.text), quoted: shortQuoted(folded.text) }));
  const found = new Set<string>();
  /** Short values already looked for: a conversation says 'user' a million times. */
  const shortSeen = new Set<string>();
  const stack: object[] = [request];
  const head = new FoldedEnd(MIN_ECHO_CHARS + 1);
  const tail = new FoldedEnd(MIN_ECHO_CHARS);
  const quoted = (folded: string): boolean => readings.some((r) => r.quoted.has(folded));
  const short = (folded: string): void => {
    // The values seen are at most the text's quoted ones.
    if (shortSeen.has(folded) || !quoted(folded)) return;
    shortSeen.add(folded);
    for (const r of readings) {
      if (r.quoted.has(folded))
        for (const q of QUOTES) r.folded.eachPlace(`${q}${folded}${q}`, (at, end) => found.add(r.folded.source(at, end)));
    }
  };
  // A value's end is an echo only after an ellipsis: a text without one is never looked at for ends.
  const ends = readings.some((r) => r.index.ellipsis);
  const mayHold = (): boolean =>
    readings.some((r) => r.index.mayHold(head.codes, ends ? tail.codes : undefined, tail.size - MIN_ECHO_CHARS));
  const long = (v: FoldedValue): void => {
    for (const r of readings) r.index.echoesOf(v, (at, end) => found.add(r.folded.source(at, end)));
  };
  const look = (value: unknown): void => {
    if (typeof value !== 'string') {
      if (value !== null && typeof value === 'object') stack.push(value);
    } else if (!head.read(value, false) || (ends && head.count >= MIN_ECHO_CHARS && !tail.read(value, true))) {
      // Not ASCII at an end: folded the long way.
      const v = new FoldedValue(value);
      const first = v.head(MIN_ECHO_CHARS);
      if (first.length < MIN_ECHO_CHARS) short(first);
      else long(v);
    } else if (head.count < MIN_ECHO_CHARS) short(head.unchanged ? value : head.text(false));
    else if (mayHold()) long(new FoldedValue(value));
  };
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (Array.isArray(node)) for (let i = 0; i < node.length; i++) look(node[i]);
    else for (const key in node) look((node as Record<string, unknown>)[key]);
  }
  if (found.size > 4 * MAX_ECHOES) return null;
  // An echo inside a longer one goes with it.
  const echoes = [...found]
    .sort((a, b) => b.length - a.length)
    .filter((e, i, all) => !all.slice(0, i).some((longer) => longer.includes(e)));
  return echoes.length > MAX_ECHOES ? null : echoes;
}

function shortQuoted(folded: string): Set<string> {
  const quoted = new Set<string>();
  for (const m of folded.matchAll(SHORT_QUOTED)) quoted.add(m[2]);
  return quoted;
}

/** `text` with every echo cut out, each replaced by an ellipsis (which no rule reads). */
export function withoutEchoes(text: string, echoes: readonly string[]): string {
  let out = text;
  for (const echo of echoes) if (out.includes(echo)) out = out.split(echo).join('\u2026');
  return out;
}

/** Bits of the bitmap of four-character heads: a miss costs one read. */
const HEAD_BITS = 1 << 18;

function headHash(a: number, b: number, c: number, d: number): number {
  const h = Math.imul(a, 0x9e3779b1) ^ Math.imul(b, 0x85ebca77) ^ Math.imul(c, 0xc2b2ae3d) ^ Math.imul(d, 0x27d4eb2f);
  return (h >>> 0) % HEAD_BITS;
}

/** Where each run of MIN_ECHO_CHARS characters starts in the text (a few places each). */
class TextIndex {
  private readonly places = new Map<string, number[]>();
  private readonly heads = new Uint8Array(HEAD_BITS >>> 3);
  /** A hash of each run, which a value's folded ends are checked against before anything is folded or copied. */
  private readonly runs = new Set<number>();
  readonly ellipsis: boolean;

  constructor(private readonly text: string) {
    this.ellipsis = text.includes('...') || text.includes('\u2026');
    for (let i = 0; i + MIN_ECHO_CHARS <= text.length; i++) {
      const gram = text.slice(i, i + MIN_ECHO_CHARS);
      const list = this.places.get(gram);
      if (list === undefined) this.places.set(gram, [i]);
      else if (list.length < MAX_PLACES) list.push(i);
      const h = headHash(text.charCodeAt(i), text.charCodeAt(i + 1), text.charCodeAt(i + 2), text.charCodeAt(i + 3));
      this.heads[h >>> 3] |= 1 << (h & 7);
      let run = 0;
      for (let k = i; k < i + MIN_ECHO_CHARS; k++) run = Math.imul(run ^ text.charCodeAt(k), 0x01000193);
      this.runs.add(run & 0x3fffffff);
    }
  }

  echoesOf(value: FoldedValue, found: (at: number, end: number) => void): void {
    const head = value.head(MIN_ECHO_CHARS);
    if (this.mayStart(head)) {
      for (const at of this.places.get(head) ?? []) {
        // One more character than the text holds from `at`: a value that long cannot be there whole.
        const v = value.head(this.text.length - at + 1);
        const length = commonPrefix(this.text, at, v);
        if (length === v.length) found(at, at + length);
        else {
          const end = truncatedAt(this.text, at, length);
          if (end > 0) found(at, end);
        }
      }
    }
    if (!this.ellipsis || value.head(MIN_ECHO_CHARS + 1).length <= MIN_ECHO_CHARS) return;
    const tail = value.tail(MIN_ECHO_CHARS);
    if (this.mayStart(tail)) {
      for (const start of this.places.get(tail) ?? []) {
        const stop = start + MIN_ECHO_CHARS;
        const begin = cutBefore(this.text, stop, commonSuffix(this.text, stop, value.tail(stop + 1)));
        if (begin >= 0) found(begin, stop);
      }
    }
  }

  /** Whether the text holds the first or the last MIN_ECHO_CHARS folded characters of a value (`head`, `tail` from `at`): a bitmap read each, a lookup on a hit. */
  mayHold(head: Uint16Array, tail: Uint16Array | undefined, at: number): boolean {
    return this.holds(head, 0) || (tail !== undefined && this.holds(tail, at));
  }

  private holds(codes: Uint16Array, at: number): boolean {
    if (!this.mayStartWith(codes[at], codes[at + 1], codes[at + 2], codes[at + 3])) return false;
    let run = 0;
    for (let k = at; k < at + MIN_ECHO_CHARS; k++) run = Math.imul(run ^ codes[k], 0x01000193);
    return this.runs.has(run & 0x3fffffff);
  }

  private mayStart(gram: string): boolean {
    return this.mayStartWith(gram.charCodeAt(0), gram.charCodeAt(1), gram.charCodeAt(2), gram.charCodeAt(3));
  }

  private mayStartWith(a: number, b: number, c: number, d: number): boolean {
    const h = headHash(a, b, c, d);
    return (this.heads[h >>> 3] & (1 << (h & 7))) !== 0;
  }
}

/** Where a prefix of a value the text holds from `at` ends, if marked cut short (an ellipsis, or its opening quote), else 0. */
function truncatedAt(text: string, at: number, length: number): number {
  const open = text[at - 1];
  for (let end = at + length; end >= at + Math.max(MIN_ECHO_CHARS, length - 3); end--) {
    if (text.startsWith('...', end) || text[end] === '\u2026') return end;
    if (end === at + length && open !== undefined && QUOTES.has(open) && text[end] === open) return end;
  }
  return 0;
}

/** Where a suffix of a value that the text holds up to `stop` (for `length` characters) starts, if an ellipsis comes right before it, else -1. */
function cutBefore(text: string, stop: number, length: number): number {
  for (let begin = stop - length; begin <= stop - Math.max(MIN_ECHO_CHARS, length - 3); begin++) {
    if (text.endsWith('...', begin) || text[begin - 1] === '\u2026') return begin;
  }
  return -1;
}

function commonPrefix(text: string, at: number, value: string): number {
  const max = Math.min(value.length, text.length - at);
  let n = 0;
  while (n < max && text.charCodeAt(at + n) === value.charCodeAt(n)) n++;
  return n;
}

function commonSuffix(text: string, stop: number, value: string): number {
  const max = Math.min(value.length, stop);
  let n = 0;
  while (n < max && text.charCodeAt(stop - 1 - n) === value.charCodeAt(value.length - 1 - n)) n++;
  return n;
}
