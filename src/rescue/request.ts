import { StringDecoder } from 'node:string_decoder';
import { DEFAULTS } from '../config/schema.js';
import { codingsOf, decodeSync } from '../upstream/content-coding.js';
import { TOO_MANY_ITEMS, parseObject, parseObjectNow } from '../lib/json-source.js';
import { scanJson, type JsonShape } from '../lib/json-shape.js';
import { timeSlice } from '../lib/time-slice.js';

/*
 * The client's request as the rescue sees it. The bytes go upstream exactly as they came, and
 * nothing is parsed until something needs to look inside: a rescue (the upstream said it was too
 * long) or the compaction memory. (A compressed body arrives decoded already, bounded, from
 * routes/request-body.ts.) A body that cannot be read then (not JSON, a corrupt encoding) simply
 * cannot be compacted: the upstream already answered it, and that answer is relayed.
 */
export interface IncomingRequest {
  /** The bytes the client sent, in one buffer (joined on first use). */
  readonly raw: Buffer;
  /** The same bytes as they arrived, for the first attempt: one buffer, or the chunks unjoined. */
  readonly wire: Buffer | readonly Buffer[];
  /**
   * The parsed body when it is a JSON object the rescue can compact; null otherwise. Parsed in one
   * piece unless `load()` parsed it first; a body over PARSED_AT_ONCE_BYTES is never parsed here,
   * only by `load()` (null until then): a body the rescue budget shed must stay unparsed.
   */
  readonly json: Record<string, unknown> | null;
  /**
   * `json`, parsed in slices that let other requests run between them. A body with a top-level list of more than MAX_RESCUED_ITEMS, or a piece
   * parsed at once (a message, a field) of more than MAX_PIECE_TOKENS, is not parsed at all: null,
   * and `tooManyItems` says why.
   */
  load(): Promise<Record<string, unknown> | null>;
  /** Whether `load()` stopped at a top-level list longer than MAX_RESCUED_ITEMS, or at a piece of more than MAX_PIECE_TOKENS. */
  readonly tooManyItems: boolean;
  /** Lets go of the parsed body and the joined bytes (a later `load()` reads them again): nothing is held while an upstream thinks or an answer streams. */
  release(): void;
  /** The body's shape (its size, strings, keys, objects, lists...), scanned once between time slices: what parsing it will cost, known before it is parsed. */
  shape(): Promise<JsonShape>;
  /** Size of the body once decoded (the wire size when it was not compressed); 0 when it cannot be decoded. */
  readonly bytes: number;
  /** The body once decoded, in one buffer; null when it cannot be decoded. */
  plain(): Buffer | null;
}

/**
 * Nesting deeper than this is forwarded but never compacted: compaction serialises the request
 * again, and JSON.stringify overflows the stack at a few thousand levels. Real requests (tool
 * schemas included) nest a few dozen levels at most.
 */
export const MAX_COMPACTABLE_DEPTH = 256;

/**
 * A conversation longer than this is not rescued, nor parsed: each of the compaction's passes over
 * it, and the collector's pauses over its objects, would hold the event loop longer than other
 * clients should wait. No agent session comes near it.
 */
export const MAX_RESCUED_ITEMS = 150_000;

/**
 * A piece of the body parsed in one JSON.parse (one message, one top-level field that is not a
 * list) with more tokens than this is not rescued: its parse alone would hold the event loop for
 * too long (a `metadata` object of 3 million keys is seconds of JSON.parse). A message or a tool
 * schema has hundreds; OpenAI caps a structured-output schema at 5,000 properties.
 */
export const MAX_PIECE_TOKENS = 100_000;

/** The most a body may weigh to be parsed without time slices, by `json`. */
export const PARSED_AT_ONCE_BYTES = 256 * 1024;

export function readIncoming(
  received: Buffer | readonly Buffer[] | undefined,
  contentEncoding: string | undefined,
  limitBytes: number = DEFAULTS.bodyLimitBytes,
  /** The body decoded already, as it was received (routes/request-body.ts); null when it could not be. */
  decoded?: Buffer | null,
): IncomingRequest {
  return new LazyIncoming(wireOf(received), contentEncoding, limitBytes, decoded);
}

/** Every request builds one, and most never read it: a class, its getters on its prototype, is the cheap shape. */
class LazyIncoming implements IncomingRequest {
  #joined: Buffer | undefined;
  #decoded: Buffer | null | undefined;
  #json: Record<string, unknown> | null | undefined;
  #shape: Promise<JsonShape> | undefined;
  tooManyItems = false;

  constructor(
    readonly wire: Buffer | readonly Buffer[],
    private readonly contentEncoding: string | undefined,
    private readonly limitBytes: number,
    decoded: Buffer | null | undefined,
  ) {
    this.#decoded = decoded;
  }

  get raw(): Buffer {
    return (this.#joined ??= Buffer.isBuffer(this.wire) ? this.wire : Buffer.concat(this.wire));
  }

  get bytes(): number {
    if (this.#plain()) return Buffer.isBuffer(this.wire) ? this.wire.length : this.wire.reduce((sum, chunk) => sum + chunk.length, 0);
    return this.#decode()?.length ?? 0;
  }

  get json(): Record<string, unknown> | null {
    if (this.#json === undefined && this.bytes > PARSED_AT_ONCE_BYTES) return null;
    if (this.#json === undefined) this.#json = parseNow(this.#decode());
    return this.#json;
  }

  async load(): Promise<Record<string, unknown> | null> {
    if (this.#json !== undefined) return this.#json;
    const shape = await this.shape();
    if (shape.largestPiece > MAX_PIECE_TOKENS || shape.longestList > MAX_RESCUED_ITEMS) {
      this.tooManyItems = true;
      return (this.#json = null);
    }
    const text = await this.#text();
    const parsed = text ? await parseObject(text, MAX_COMPACTABLE_DEPTH, MAX_RESCUED_ITEMS) : null;
    if (parsed === TOO_MANY_ITEMS) this.tooManyItems = true;
    // A synchronous read may have finished first.
    return (this.#json ??= parsed === TOO_MANY_ITEMS ? null : parsed);
  }

  shape(): Promise<JsonShape> {
    return (this.#shape ??= scanJson(this.#plain() ? (Buffer.isBuffer(this.wire) ? [this.wire] : this.wire) : [this.#decode() ?? EMPTY]));
  }

  /** Sent as it is (no content coding): its bytes are the chunks as they came. */
  #plain(): boolean {
    return this.#decoded === undefined && codingsOf(this.contentEncoding)?.length === 0;
  }

  /** The body as text; a plain one read off its chunks between time slices, never joined into another copy first. */
  async #text(): Promise<string | null> {
    if (this.#plain() && !Buffer.isBuffer(this.wire)) {
      const decoder = new StringDecoder('utf8');
      const slice = timeSlice();
      let text = '';
      for (const chunk of this.wire) {
        text += decoder.write(chunk);
        if (slice.due()) await slice.pause();
      }
      return text + decoder.end();
    }
    const bytes = this.#decode();
    return bytes && bytes.length > 0 ? bytes.toString('utf8') : null;
  }

  plain(): Buffer | null {
    return this.#plain() ? this.raw : this.#decode();
  }

  release(): void {
    this.#json = undefined;
    this.#joined = undefined;
  }

  #decode(): Buffer | null {
    if (this.#decoded === undefined) this.#decoded = decompressed(this.raw, this.contentEncoding, this.limitBytes);
    return this.#decoded;
  }
}

const EMPTY = Buffer.alloc(0);

/** A body of one chunk (every small request) is that buffer; several stay a list until joined. */
function wireOf(received: Buffer | readonly Buffer[] | undefined): Buffer | readonly Buffer[] {
  if (received === undefined) return EMPTY;
  if (Buffer.isBuffer(received)) return received;
  if (received.length <= 1) return received[0] ?? EMPTY;
  return received;
}

function parseNow(bytes: Buffer | null): Record<string, unknown> | null {
  return bytes && bytes.length > 0 ? parseObjectNow(bytes.toString('utf8'), MAX_COMPACTABLE_DEPTH) : null;
}

/**
 * Undoes the codings, last applied first; null when the body cannot be decoded. The decoded size
 * may not pass `limitBytes`, the same limit the raw body has: a few KB of gzip can inflate to
 * gigabytes.
 */
function decompressed(body: Buffer, contentEncoding: string | undefined, limitBytes: number): Buffer | null {
  const codings = codingsOf(contentEncoding);
  if (codings === null) return null;
  if (codings.length === 0) return body;
  const decoded = decodeSync(body, codings, { limit: limitBytes });
  return decoded.outcome === 'complete' ? decoded.bytes : null;
}
