/**
 * Text the request itself supplied, found again in the error that answers it. A provider that
 * refuses a value often quotes it back ("Invalid value: '<the client's role string>'"), so a
 * client can make an error say anything ("maximum context length is 40 tokens"); none of that may
 * make a verdict or state a limit. classify.ts judges an error once as it came and, when that
 * verdict would act (an overflow, a refusal of bound state), once more with these echoes cut out.
 *
 * An echo is a string value of the request (keys are the API's words, not the client's), found
 * in the error text:
 *   - whole: all of a value of at least MIN_ECHO_CHARS characters; a shorter one only inside
 *     quotes ('user', "gpt-4o", `x`), where the provider marks it as a value;
 *   - truncated: a prefix of a value (at least MIN_ECHO_CHARS) that the text ends with an
 *     ellipsis or with the quote opened right before it, or a suffix that follows an ellipsis
 *     (pydantic's "first...last").
 * A value's middle is never an echo: a person who pasted an earlier error into the conversation
 * must not lose the rescue of the next real one, whose sentence shares most of its words.
 */

/** The shortest value found unquoted: every provider sentence that decides something is longer. */
export const MIN_ECHO_CHARS = 16;
/** Echoes one error may hold and still be judged: an error quotes a handful of values, and one that quotes more is the request's own text. */
const MAX_ECHOES = 64;
/** Places one value's first characters are looked for in the text: repetitive text cannot make it quadratic. */
const MAX_PLACES = 8;

const QUOTES = new Set(["'", '"', '`']);
const SHORT_QUOTED = /(['"`])([^'"`\n]{1,15})\1/g;

/**
 * The echoes of `request`'s values in `text`, as the exact strings to cut (a short one with its
 * quotes), longest first; null when there are more than MAX_ECHOES (no verdict is read from such a
 * text). One walk over the request, with no recursion (bodies nest deeply) and no bound but the
 * body's own: a bound would be a place to hide a value. Per value, a bitmap of the text's first
 * characters spares the lookup of nearly every one that cannot be there.
 */
export function echoesIn(text: string, request: unknown): string[] | null {
  if (text.length < 3 || request === null || typeof request !== 'object') return [];
  const index = new TextIndex(text);
  const quoted = new Set<string>();
  for (const m of text.matchAll(SHORT_QUOTED)) quoted.add(m[2]);
  const found = new Set<string>();
  const stack: object[] = [request];
  const look = (value: unknown): void => {
    if (typeof value !== 'string') {
      if (value !== null && typeof value === 'object') stack.push(value);
    } else if (value.length >= MIN_ECHO_CHARS) index.echoesOf(value, found);
    else if (quoted.has(value)) for (const q of QUOTES) if (text.includes(`${q}${value}${q}`)) found.add(`${q}${value}${q}`);
  };
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (Array.isArray(node)) for (let i = 0; i < node.length; i++) look(node[i]);
    else for (const key in node) look((node as Record<string, unknown>)[key]);
  }
  if (found.size > 4 * MAX_ECHOES) return null;
  // An echo inside a longer one goes with it.
  const echoes = [...found].sort((a, b) => b.length - a.length).filter((e, i, all) => !all.slice(0, i).some((longer) => longer.includes(e)));
  return echoes.length > MAX_ECHOES ? null : echoes;
}

/** `text` with every echo cut out, each replaced by an ellipsis (which no rule reads). */
export function withoutEchoes(text: string, echoes: readonly string[]): string {
  let out = text;
  for (const echo of echoes) if (out.includes(echo)) out = out.split(echo).join('\u2026');
  return out;
}

/** Bits of the bitmap of four-character heads: a miss costs one read. */
const HEAD_BITS = 1 << 18;

function headHash(s: string, at: number): number {
  const h = Math.imul(s.charCodeAt(at), 0x9e3779b1) ^ Math.imul(s.charCodeAt(at + 1), 0x85ebca77) ^ Math.imul(s.charCodeAt(at + 2), 0xc2b2ae3d) ^ Math.imul(s.charCodeAt(at + 3), 0x27d4eb2f);
  return (h >>> 0) % HEAD_BITS;
}

/** Where each run of MIN_ECHO_CHARS characters starts in the text (a few places each). */
class TextIndex {
  private readonly places = new Map<string, number[]>();
  private readonly heads = new Uint8Array(HEAD_BITS >>> 3);

  constructor(private readonly text: string) {
    for (let i = 0; i + MIN_ECHO_CHARS <= text.length; i++) {
      const gram = text.slice(i, i + MIN_ECHO_CHARS);
      const list = this.places.get(gram);
      if (list === undefined) this.places.set(gram, [i]);
      else if (list.length < MAX_PLACES) list.push(i);
      const h = headHash(text, i);
      this.heads[h >>> 3] |= 1 << (h & 7);
    }
  }

  /** Adds to `found` the whole or truncated echoes of one long value. */
  echoesOf(value: string, found: Set<string>): void {
    const tail = value.length - MIN_ECHO_CHARS;
    if (this.mayStart(value, 0)) {
      for (const at of this.places.get(value.slice(0, MIN_ECHO_CHARS)) ?? []) {
        const length = commonPrefix(this.text, at, value);
        if (length === value.length) found.add(value);
        else {
          const end = truncatedAt(this.text, at, length);
          if (end > 0) found.add(this.text.slice(at, end));
        }
      }
    }
    if (tail > 0 && this.mayStart(value, tail)) {
      for (const start of this.places.get(value.slice(tail)) ?? []) {
        const stop = start + MIN_ECHO_CHARS;
        const begin = cutBefore(this.text, stop, commonSuffix(this.text, stop, value));
        if (begin >= 0) found.add(this.text.slice(begin, stop));
      }
    }
  }

  private mayStart(value: string, at: number): boolean {
    const h = headHash(value, at);
    return (this.heads[h >>> 3] & (1 << (h & 7))) !== 0;
  }
}

/**
 * Where a prefix of a value that the text holds from `at` for `length` characters ends, if the
 * text marks it as cut short there (an ellipsis, or the quote it was opened with), else 0. The
 * value may go on with dots the ellipsis shares.
 */
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
