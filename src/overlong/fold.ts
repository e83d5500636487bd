/** Full case mapping (`STRASSE` is `straße`), whitespace runs one space; a value is never unescaped, so it matches its own quotation. */

const WHITESPACE = /\s/;
const WHITESPACE_RUNS = /\s+/g;
const ENTITY = /&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|(quot|amp|lt|gt|apos|nbsp));/iy;
const NAMED: Record<string, string> = { quot: '"', amp: '&', lt: '<', gt: '>', apos: "'", nbsp: '\u00a0' };
/** JSON's escapes, and Python's `\'` and `\xHH` (a repr). */
const BACKSLASHED: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', "'": "'", b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
const HEX = /^[0-9a-fA-F]+$/;

/** One code point (or decoded escape) folded: the same as folding a whole string (final sigma aside, which is why it is mapped to σ). */
function foldCase(s: string): string {
  const folded = s.toUpperCase().toLowerCase();
  return folded.includes('\u03c2') ? folded.replaceAll('\u03c2', '\u03c3') : folded;
}

function foldValue(s: string): string {
  return foldCase(s).replace(WHITESPACE_RUNS, ' ');
}

export interface Unescape {
  entities: boolean;
  backslashes: boolean;
}

/** The escape (an HTML entity, a backslash escape) that starts at `i`, decoded, and where it ends. */
function escapeAt(s: string, i: number, undo: Unescape): { char: string; end: number } | undefined {
  if (s[i] === '&' && undo.entities) {
    ENTITY.lastIndex = i;
    const m = ENTITY.exec(s);
    if (m === null) return undefined;
    const cp = m[1] !== undefined ? Number.parseInt(m[1], 10) : m[2] !== undefined ? Number.parseInt(m[2], 16) : -1;
    const char = cp < 0 ? NAMED[m[3].toLowerCase()] : cp <= 0x10ffff ? String.fromCodePoint(cp) : '\ufffd';
    return { char, end: i + m[0].length };
  }
  if (s[i] !== '\\' || !undo.backslashes) return undefined;
  const next = s[i + 1];
  const hexDigits = next === 'u' ? 4 : next === 'x' ? 2 : 0;
  if (hexDigits > 0) {
    const hex = s.slice(i + 2, i + 2 + hexDigits);
    return hex.length === hexDigits && HEX.test(hex)
      ? { char: String.fromCharCode(Number.parseInt(hex, 16)), end: i + 2 + hexDigits }
      : undefined;
  }
  const char = next === undefined ? undefined : BACKSLASHED[next];
  return char === undefined ? undefined : { char, end: i + 2 };
}

export class FoldedText {
  text = '';
  private readonly from: number[] = [];
  private readonly to: number[] = [];

  constructor(
    private readonly original: string,
    undo: Unescape,
  ) {
    const unescape = undo.entities || undo.backslashes;
    for (let i = 0; i < original.length;) {
      const escape = unescape ? escapeAt(original, i, undo) : undefined;
      const char = escape?.char ?? String.fromCodePoint(original.codePointAt(i)!);
      const end = escape?.end ?? i + char.length;
      const code = char.charCodeAt(0);
      if (code < 0x80 && code !== 0x20 && (code < 0x09 || code > 0x0d))
        this.push(code >= 0x41 && code <= 0x5a ? String.fromCharCode(code + 0x20) : char, i, end);
      else if (!WHITESPACE.test(char)) for (const unit of foldCase(char)) this.push(unit, i, end);
      else if (this.text.endsWith(' ')) this.to[this.to.length - 1] = end;
      else this.push(' ', i, end);
      i = end;
    }
  }

  private push(unit: string, from: number, to: number): void {
    this.text += unit;
    this.from.push(from);
    this.to.push(to);
  }

  /** The original characters that folded characters [at, end) came from. */
  source(at: number, end: number): string {
    return this.original.slice(this.from[at], this.to[end - 1]);
  }

  eachPlace(needle: string, found: (at: number, end: number) => void): void {
    for (let at = this.text.indexOf(needle); at >= 0; at = this.text.indexOf(needle, at + 1)) found(at, at + needle.length);
  }
}

/** As it is, and with each kind of escape undone (HTML, backslashes, both: a value escaped one way keeps the other as written). */
export function foldedReadings(text: string): FoldedText[] {
  const entities = text.includes('&');
  const backslashes = text.includes('\\');
  const undo: Unescape[] = [{ entities: false, backslashes: false }];
  if (entities) undo.push({ entities: true, backslashes: false });
  if (backslashes) undo.push({ entities: false, backslashes: true });
  if (entities && backslashes) undo.push({ entities: true, backslashes: true });
  return undo.map((u) => new FoldedText(text, u));
}

/** A value's ends folded into a buffer without copying it, where ASCII: most values are never looked at further. */
export class FoldedEnd {
  readonly codes: Uint16Array;
  /** Characters read: all of the value folded when fewer than the buffer holds. */
  count = 0;
  /** Whether folding changed none of the characters read (a short value is then its own fold). */
  unchanged = true;

  constructor(readonly size: number) {
    this.codes = new Uint16Array(size);
  }

  read(value: string, fromEnd: boolean): boolean {
    const codes = this.codes;
    const size = this.size;
    const last = value.length - 1;
    let count = 0;
    let unchanged = true;
    let space = false;
    for (let k = 0; k <= last && count < size; k++) {
      let c = value.charCodeAt(fromEnd ? last - k : k);
      if (c >= 0x80) return false;
      if (c === 0x20 || (c >= 0x09 && c <= 0x0d)) {
        // The ends trimmed, a run one space.
        if (space || c !== 0x20 || count === 0) unchanged = false;
        space = count > 0;
        continue;
      }
      if (space) {
        codes[fromEnd ? size - 1 - count : count] = 0x20;
        if (++count === size) break;
        space = false;
      }
      if (c >= 0x41 && c <= 0x5a) {
        c += 0x20;
        unchanged = false;
      }
      codes[fromEnd ? size - 1 - count : count] = c;
      count++;
    }
    this.count = count;
    this.unchanged = unchanged && !space;
    return true;
  }

  text(fromEnd: boolean): string {
    return String.fromCharCode(...(fromEnd ? this.codes.subarray(this.size - this.count) : this.codes.subarray(0, this.count)));
  }
}

/** Read from either end only as far as a comparison needs: a value may be tens of megabytes. */
export class FoldedValue {
  private readonly raw: string;
  private headCache = '';
  private headWhole = false;
  private tailCache = '';
  private tailWhole = false;

  constructor(value: string) {
    this.raw = value.trim();
  }

  head(n: number): string {
    while (!this.headWhole && this.headCache.length < n + 2) {
      const take = Math.max(64, 2 * (n + 2), 2 * this.headCache.length);
      this.headWhole = take >= this.raw.length;
      // A prefix folds as the whole does but for its last code point (a pair cut in two): two spare.
      this.headCache = foldValue(this.headWhole ? this.raw : this.raw.slice(0, take));
    }
    return this.headCache.length <= n ? this.headCache : this.headCache.slice(0, n);
  }

  tail(n: number): string {
    while (!this.tailWhole && this.tailCache.length < n + 2) {
      const take = Math.max(64, 2 * (n + 2), 2 * this.tailCache.length);
      this.tailWhole = take >= this.raw.length;
      this.tailCache = foldValue(this.tailWhole ? this.raw : this.raw.slice(-take));
    }
    return this.tailCache.length <= n ? this.tailCache : this.tailCache.slice(-n);
  }
}
