import { isAscii } from 'node:buffer';
import { BACKSLASH, CLOSE_ARRAY, CLOSE_OBJECT, COLON, COMMA, OPEN_ARRAY, OPEN_OBJECT, QUOTE } from './json-source.js';
import { timeSlice } from './time-slice.js';

/*
 * What parsing a JSON body will cost, counted off its bytes before it is parsed: V8 spends far more on the structure than on the
 * text (bench/findings.md), so a body of a few million keys or strings needs many times its size.
 */

export interface JsonShape {
  bytes: number;
  /** Whether every byte is ASCII: V8 then holds the body's text at one byte a character, else two. */
  ascii: boolean;
  objects: number;
  arrays: number;
  /** Strings, keys included. */
  strings: number;
  keys: number;
  /** The `,` between values: each a value or entry more than the containers' first ones. */
  commas: number;
  /** Elements of the top-level lists (a conversation's messages): the rescue handles each on its own. */
  items: number;
  longestList: number;
  /**
   * Most tokens (strings, `{`, `[`, `,`, `:`) in one piece the rescue's reader hands to JSON.parse at once; one parse's stall
   * grows with it.
   */
  largestPiece: number;
}

const SCANNED_PER_STEP = 256 * 1024;

/** The shape of the JSON text in `chunks` (a body as it arrived, in pieces). Malformed text is counted as far as it goes. */
export async function scanJson(chunks: readonly Buffer[]): Promise<JsonShape> {
  const scan = new Scan();
  const slice = timeSlice();
  for (const chunk of chunks) {
    if (!isAscii(chunk)) scan.shape.ascii = false;
    scan.shape.bytes += chunk.length;
    for (let from = 0; from < chunk.length;) {
      from = scan.step(chunk, from, Math.min(chunk.length, from + SCANNED_PER_STEP));
      if (slice.due()) await slice.pause();
    }
  }
  return scan.done();
}

class Scan {
  readonly shape: JsonShape = {
    bytes: 0,
    ascii: true,
    objects: 0,
    arrays: 0,
    strings: 0,
    keys: 0,
    commas: 0,
    items: 0,
    longestList: 0,
    largestPiece: 0,
  };
  private depth = 0;
  /** Inside a string: how many backslashes run up to where the scan stopped (a chunk's end). */
  private inString = false;
  private backslashes = 0;
  /** Inside a list that is a field of the root object: its elements are pieces of their own. */
  private inTopList = false;
  private listItems = 0;
  private piece = 0;

  /** Scans `chunk` from `from` up to about `end` (a string is skipped whole); where it stopped. */
  step(chunk: Buffer, from: number, end: number): number {
    const s = this.shape;
    let i = from;
    while (i < end) {
      if (this.inString) {
        i = this.skipString(chunk, i);
        continue;
      }
      switch (chunk[i]) {
        case QUOTE:
          s.strings++;
          this.piece++;
          this.inString = true;
          this.backslashes = 0;
          break;
        case OPEN_OBJECT:
          s.objects++;
          this.piece++;
          this.depth++;
          break;
        case OPEN_ARRAY:
          s.arrays++;
          if (this.depth === 1) {
            // A top-level list: each element is a piece, and an item.
            this.endPiece();
            this.inTopList = true;
            this.listItems = 0;
            this.addItem();
          } else this.piece++;
          this.depth++;
          break;
        case CLOSE_OBJECT:
        case CLOSE_ARRAY:
          this.depth--;
          if (this.depth <= 1) this.endPiece();
          if (this.depth === 1) this.inTopList = false;
          break;
        case COMMA:
          s.commas++;
          if (this.depth === 1 || (this.depth === 2 && this.inTopList)) {
            this.endPiece();
            if (this.depth === 2) this.addItem();
          } else this.piece++;
          break;
        case COLON:
          s.keys++;
          this.piece++;
          break;
      }
      i++;
    }
    return i;
  }

  /** Past the string's closing quote, or to the chunk's end when it does not close in it. */
  private skipString(chunk: Buffer, from: number): number {
    for (let at = from; ;) {
      const quote = chunk.indexOf(QUOTE, at);
      if (quote < 0) {
        this.backslashes = trailingBackslashes(chunk, at, chunk.length, this.backslashes);
        return chunk.length;
      }
      const escapes = trailingBackslashes(chunk, at, quote, this.backslashes);
      this.backslashes = 0;
      if (escapes % 2 === 0) {
        this.inString = false;
        return quote + 1;
      }
      at = quote + 1;
    }
  }

  /** One more element of a top-level list (an empty list counts one: the estimate errs high). */
  private addItem(): void {
    this.shape.items++;
    if (++this.listItems > this.shape.longestList) this.shape.longestList = this.listItems;
  }

  private endPiece(): void {
    if (this.piece > this.shape.largestPiece) this.shape.largestPiece = this.piece;
    this.piece = 0;
  }

  done(): JsonShape {
    this.endPiece();
    return this.shape;
  }
}

/** The backslashes just before `end`, back to `start`; when they reach it, `before` more (those that ended the chunk before). */
function trailingBackslashes(chunk: Buffer, start: number, end: number, before: number): number {
  let k = end - 1;
  while (k >= start && chunk[k] === BACKSLASH) k--;
  return k < start ? end - start + before : end - 1 - k;
}
