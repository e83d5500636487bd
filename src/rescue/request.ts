import { StringDecoder } from 'node:string_decoder';
import { DEFAULTS } from '../config/schema.js';
import { codingsOf, decodeSync } from '../upstream/content-coding.js';
import { TOO_MANY_ITEMS, parseObject, parseObjectNow } from '../lib/json-source.js';
import { scanJson, type JsonShape } from '../lib/json-shape.js';
import { timeSlice } from '../lib/time-slice.js';

/*
 * The bytes go upstream exactly as they came; nothing is parsed until a rescue or the memory needs to
 * look inside. A body that cannot be read then is not compacted: the upstream's answer is relayed.
 */
export interface IncomingRequest {
  readonly raw: Buffer;
  readonly wire: Buffer | readonly Buffer[];
  /** Over PARSED_AT_ONCE_BYTES, null until `load()`: a body the rescue budget shed must stay unparsed. */
  readonly json: Record<string, unknown> | null;
  /** Parsed in slices that let other requests run between them. */
  load(): Promise<Record<string, unknown> | null>;
  readonly tooManyItems: boolean;
  /** Nothing is held while an upstream thinks or an answer streams; a later `load()` reads again. */
  release(): void;
  /** What parsing it will cost, known before it is parsed. */
  shape(): Promise<JsonShape>;
  readonly bytes: number;
  plain(): Buffer | null;
}

/**
 * Deeper is forwarded but never compacted: JSON.stringify overflows the stack at a few thousand levels.
 * Real requests nest a few dozen at most.
 */
export const MAX_COMPACTABLE_DEPTH = 256;

/** Longer is not rescued, nor parsed: it would hold the event loop too long. No agent session comes near it. */
export const MAX_RESCUED_ITEMS = 150_000;

/**
 * A piece parsed in one JSON.parse (a message, a top-level field) with more tokens is not rescued.
 * A message or a tool schema has hundreds; OpenAI caps a structured-output schema at 5,000 properties.
 */
export const MAX_PIECE_TOKENS = 100_000;

export const PARSED_AT_ONCE_BYTES = 256 * 1024;

export function readIncoming(
  received: Buffer | readonly Buffer[] | undefined,
  contentEncoding: string | undefined,
  limitBytes: number = DEFAULTS.bodyLimitBytes,
  decoded?: Buffer | null,
): IncomingRequest {
  return new LazyIncoming(wireOf(received), contentEncoding, limitBytes, decoded);
}

/** Every request builds one, most never read it: a class, its getters on its prototype, is the cheap shape. */
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

  #plain(): boolean {
    return this.#decoded === undefined && codingsOf(this.contentEncoding)?.length === 0;
  }

  /** Never joined into another copy first. */
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

function wireOf(received: Buffer | readonly Buffer[] | undefined): Buffer | readonly Buffer[] {
  if (received === undefined) return EMPTY;
  if (Buffer.isBuffer(received)) return received;
  if (received.length <= 1) return received[0] ?? EMPTY;
  return received;
}

function parseNow(bytes: Buffer | null): Record<string, unknown> | null {
  return bytes && bytes.length > 0 ? parseObjectNow(bytes.toString('utf8'), MAX_COMPACTABLE_DEPTH) : null;
}

/** Last applied first. Bounded by `limitBytes`: a few KB of gzip can inflate to gigabytes. */
function decompressed(body: Buffer, contentEncoding: string | undefined, limitBytes: number): Buffer | null {
  const codings = codingsOf(contentEncoding);
  if (codings === null) return null;
  if (codings.length === 0) return body;
  const decoded = decodeSync(body, codings, { limit: limitBytes });
  return decoded.outcome === 'complete' ? decoded.bytes : null;
}
