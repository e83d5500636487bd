import { timeSlice } from '../lib/time-slice.js';
import type { RequestModel } from '../upstream/upstreams.js';
import type { ReceivedBody } from './request-body.js';

/*
 * The model a body names as the upstream's JSON parser reads it: the top-level `model` wherever it stands (the Python SDKs write
 * `messages` first), the last where the key repeats, escapes decoded; never a nested one (`metadata.model`, a tool's schema). One
 * pass over the bytes that builds nothing: only top-level keys and the model's value are decoded.
 */

/** A model name longer than this (as sent, escapes included) is not read: no provider has one. */
export const MAX_MODEL_BYTES = 512;
/** `"model"` spelled with every letter escaped (`\u006d...`) is 30 bytes: a longer key is another. */
const MAX_KEY_BYTES = 30;

/** How far a string is read byte by byte before its end is searched for. */
const SHORT_STRING = 24;
const QUOTE = 0x22;
const BOM = [0xef, 0xbb, 0xbf];
const BACKSLASH = 0x5c;

// Where the scan stands: around the top-level object, or inside one of its members.
const START = 0;
const KEY_OR_END = 1;
const KEY = 2;
const COLON = 3;
const VALUE = 4;
const TOP_STRING = 5;
const SCALAR = 6;
const NESTED = 7;
const AFTER_VALUE = 8;
const DONE = 9;
const BROKEN = 10;

export class ModelScanner {
  #state = START;
  /** Brackets open inside the current top-level value. */
  #depth = 0;
  #inNestedString = false;
  /** Inside a string, the chunk before ended on an unpaired backslash. */
  #escaped = false;
  /** Whether the top-level key or string being read matters: a key, or the model's value, still short enough. */
  #keep = false;
  /** Its bytes in earlier chunks, when it spans several. */
  readonly #parts: Buffer[] = [];
  #textBytes = 0;
  #keyIsModel = false;
  /** The last top-level model: undefined before any, null when it was not a readable string. */
  #model: string | null | undefined;
  /** Bytes of a byte order mark read so far. */
  #bom = 0;

  write(chunk: Buffer): void {
    let i = 0;
    const n = chunk.length;
    while (i < n && this.#state !== BROKEN) {
      switch (this.#state) {
        case START:
          i = this.#start(chunk, i);
          break;
        case KEY_OR_END:
          i = skipSpace(chunk, i);
          if (i >= n) break;
          if (chunk[i] === QUOTE) this.#open(KEY, true);
          else if (chunk[i] === 0x7d) this.#state = DONE;
          else this.#state = BROKEN;
          i++;
          break;
        case KEY:
        case TOP_STRING:
          i = this.#readString(chunk, i);
          break;
        case COLON:
          i = skipSpace(chunk, i);
          if (i >= n) break;
          this.#state = chunk[i] === 0x3a ? VALUE : BROKEN;
          i++;
          break;
        case VALUE:
          i = this.#value(chunk, skipSpace(chunk, i));
          break;
        case SCALAR:
          while (i < n && !endsScalar(chunk[i])) i++;
          if (i < n) this.#state = AFTER_VALUE;
          break;
        case NESTED:
          i = this.#nested(chunk, i);
          break;
        case AFTER_VALUE:
          i = skipSpace(chunk, i);
          if (i >= n) break;
          this.#state = chunk[i] === 0x2c ? KEY_OR_END : chunk[i] === 0x7d ? DONE : BROKEN;
          i++;
          break;
        case DONE:
          i = skipSpace(chunk, i);
          // Anything after the object makes the body no JSON at all.
          if (i < n) this.#state = BROKEN;
          break;
      }
    }
  }

  result(): RequestModel {
    if (this.#state !== DONE) return { unreadable: 'the body is not a JSON object' };
    if (this.#model === undefined) return { unreadable: 'the body has no top-level "model"' };
    if (this.#model === null) return { unreadable: `the body's top-level "model" is not a string of at most ${MAX_MODEL_BYTES} bytes` };
    return this.#model;
  }

  #start(chunk: Buffer, from: number): number {
    if (this.#bom < BOM.length) {
      // A UTF-8 byte order mark, which Python's json.loads accepts on bytes, in whatever chunks it comes.
      if (this.#bom === 0 && chunk[from] !== BOM[0]) this.#bom = BOM.length;
      else if (chunk[from] !== BOM[this.#bom]) return this.#broken(from);
      else {
        this.#bom++;
        return from + 1;
      }
    }
    const i = skipSpace(chunk, from);
    if (i >= chunk.length) return i;
    this.#state = chunk[i] === 0x7b ? KEY_OR_END : BROKEN;
    return i + 1;
  }

  #broken(at: number): number {
    this.#state = BROKEN;
    return at;
  }

  #open(state: typeof KEY | typeof TOP_STRING, keep: boolean): void {
    this.#state = state;
    this.#keep = keep;
    this.#textBytes = 0;
  }

  #value(chunk: Buffer, i: number): number {
    if (i >= chunk.length) return i;
    const c = chunk[i];
    if (c === QUOTE) {
      // Only the model's value is read; any other string is skipped.
      this.#open(TOP_STRING, this.#keyIsModel);
      return i + 1;
    }
    if (this.#keyIsModel) this.#model = null;
    if (c === 0x7b || c === 0x5b) {
      this.#state = NESTED;
      this.#depth = 1;
      return i + 1;
    }
    if (endsScalar(c)) this.#state = BROKEN;
    else this.#state = SCALAR;
    return i;
  }

  /** A top-level key or string value: read while short enough to be `model` or a model's name. */
  #readString(chunk: Buffer, from: number): number {
    const end = this.#stringEnd(chunk, from);
    const stop = end < 0 ? chunk.length : end;
    if (this.#keep) {
      this.#textBytes += stop - from;
      if (this.#textBytes > (this.#state === KEY ? MAX_KEY_BYTES : MAX_MODEL_BYTES)) this.#keep = false;
    }
    if (end < 0) {
      if (this.#keep) this.#parts.push(chunk.subarray(from, stop));
      return chunk.length;
    }
    // Read where it lies, unless it began in an earlier chunk.
    let text = chunk;
    let start = from;
    if (this.#keep && this.#parts.length > 0) {
      text = Buffer.concat([...this.#parts, chunk.subarray(from, stop)]);
      start = 0;
    }
    const textEnd = start + this.#textBytes;
    if (this.#state === KEY) {
      this.#keyIsModel = this.#keep && isModelKey(text, start, textEnd);
      this.#state = COLON;
    } else {
      if (this.#keyIsModel) this.#model = this.#keep ? decoded(text, start, textEnd) : null;
      this.#state = AFTER_VALUE;
    }
    this.#parts.length = 0;
    return end + 1;
  }

  /** Inside an object or array below the top level: brackets counted, strings skipped whole. */
  #nested(chunk: Buffer, from: number): number {
    let i = from;
    const n = chunk.length;
    if (this.#inNestedString) {
      const end = this.#stringEnd(chunk, i);
      if (end < 0) return n;
      this.#inNestedString = false;
      i = end + 1;
    }
    let depth = this.#depth;
    while (i < n) {
      const c = chunk[i++];
      if (c === QUOTE) {
        const end = this.#stringEnd(chunk, i);
        if (end < 0) {
          this.#inNestedString = true;
          i = n;
          break;
        }
        i = end + 1;
      } else if (c === 0x7b || c === 0x5b) depth++;
      else if ((c === 0x7d || c === 0x5d) && --depth === 0) {
        this.#state = AFTER_VALUE;
        break;
      }
    }
    this.#depth = depth;
    return i;
  }

  /** Where the string the scan is inside ends in this chunk (its closing quote), or -1 when it goes on past it. */
  #stringEnd(chunk: Buffer, from: number): number {
    let i = from;
    if (this.#escaped) {
      if (i >= chunk.length) return -1;
      i++;
      this.#escaped = false;
    }
    // Most strings (keys, roles, ids) end within a few bytes: a plain loop costs less than a search.
    const near = Math.min(chunk.length, i + SHORT_STRING);
    for (; i < near; i++) {
      const c = chunk[i];
      if (c === QUOTE) return i;
      if (c === BACKSLASH && ++i >= chunk.length) {
        this.#escaped = true;
        return -1;
      }
    }
    const start = i;
    for (;;) {
      const quote = chunk.indexOf(QUOTE, i);
      const at = quote < 0 ? chunk.length : quote;
      let run = 0;
      while (at - run > start && chunk[at - run - 1] === BACKSLASH) run++;
      if (quote < 0) {
        // An odd run of backslashes at the end escapes the next chunk's first byte.
        this.#escaped = run % 2 === 1;
        return -1;
      }
      if (run % 2 === 0) return quote;
      i = quote + 1;
    }
  }
}

/**
 * For routes that do not read the model (the access log, the metrics, the window): a `"model":"..."` in the body's first or last 2 KB,
 * where SDKs write it (TypeScript first, Python after the conversation). A wrong guess here routes nothing.
 */
export function glancedModel(body: ReceivedBody | undefined): string | undefined {
  const bytes = body?.decoded ?? (body?.chunks.length === 1 ? body.chunks[0] : undefined);
  const first = bytes ?? body?.chunks[0];
  const last = bytes ?? body?.chunks.at(-1);
  if (!first || first.length === 0 || first[0] !== 0x7b) return undefined;
  return (
    MODEL_FIELD.exec(first.subarray(0, GLANCED_BYTES).toString('latin1'))?.[1] ??
    lastOf(last!.subarray(Math.max(0, last!.length - GLANCED_BYTES)).toString('latin1'))
  );
}

const GLANCED_BYTES = 2048;
const MODEL_FIELD = /"model"\s*:\s*"([\w.:/@+-]{1,100})"/;
const MODEL_FIELDS = /"model"\s*:\s*"([\w.:/@+-]{1,100})"/g;

function lastOf(text: string): string | undefined {
  let found: string | undefined;
  for (const m of text.matchAll(MODEL_FIELDS)) found = m[1];
  return found;
}

/** The model a body as received names: read once decoded; one whose coding could not be undone names none that can be read. */
export function modelOfReceived(body: ReceivedBody | undefined): Promise<RequestModel> | RequestModel {
  if (body?.decoded === null) return { unreadable: 'its content-encoding could not be decoded' };
  return modelOfBody(body?.decoded ? [body.decoded] : (body?.chunks ?? []));
}

/** The model a body names, read off its chunks; between chunks, other requests run when the read has taken its slice. */
export async function modelOfBody(chunks: readonly Buffer[]): Promise<RequestModel> {
  const scanner = new ModelScanner();
  const slice = timeSlice();
  for (const chunk of chunks) {
    // A body decoded in one buffer is read a piece at a time, as the wire's chunks are.
    for (let from = 0; from < chunk.length; from += SCANNED_PER_STEP) {
      scanner.write(from === 0 && chunk.length <= SCANNED_PER_STEP ? chunk : chunk.subarray(from, from + SCANNED_PER_STEP));
      if (slice.due()) await slice.pause();
    }
  }
  return scanner.result();
}

const SCANNED_PER_STEP = 256 * 1024;

function skipSpace(chunk: Buffer, from: number): number {
  let i = from;
  while (i < chunk.length) {
    const c = chunk[i];
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

/** What ends a number, `true`, `false` or `null` at the top level. */
function endsScalar(c: number): boolean {
  return c === 0x2c || c === 0x7d || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

const MODEL = Buffer.from('model');

/** Whether a top-level key is `model`: as written, or with escapes that decode to it. */
function isModelKey(text: Buffer, start: number, end: number): boolean {
  if (end - start === MODEL.length && text.compare(MODEL, 0, MODEL.length, start, end) === 0) return true;
  for (let i = start; i < end; i++) if (text[i] === BACKSLASH) return decoded(text, start, end) === 'model';
  return false;
}

/** A JSON string's contents, escapes decoded as JSON.parse decodes them; null when they are not valid JSON. */
function decoded(text: Buffer, start: number, end: number): string | null {
  const raw = text.toString('utf8', start, end);
  // Nothing to decode, nothing JSON forbids in a string: the bytes are the string.
  if (!/[\\\x00-\x1f]/.test(raw)) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return null;
  }
}
