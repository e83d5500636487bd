import type { Transform } from 'node:stream';
import zlib from 'node:zlib';
import { zstdDecodeStream, zstdDecodeSync } from './zstd.js';

/*
 * The one decoder for request bodies and upstream bodies, and the one table (CODINGS) of what can be undone, which also says what the
 * upstream is offered. A few KB of gzip can inflate to gigabytes, so the bound is on decoded bytes. `decode` streams through zlib in
 * libuv's pool (64 KiB at a time) and stops at the bound; `decodeSync` gives up there (`maxOutputLength`).
 */

export type Coding = 'gzip' | 'deflate' | 'br' | 'zstd';

export interface DecodeOptions {
  /** The most decoded bytes to produce, at every stage of a chain of codings. */
  limit: number;
  /** The input may be a prefix of the body (a held error body): decode what it holds instead of calling it corrupt. */
  truncated?: boolean;
}

export interface Decoded {
  bytes: Buffer;
  /** `over`: past the bound (`decode` keeps the first `limit` bytes, `decodeSync` nothing unless complete); `corrupt`: invalid input. */
  outcome: 'complete' | 'over' | 'corrupt';
}

type Decompressor = zlib.Gunzip | zlib.Inflate | zlib.InflateRaw | zlib.BrotliDecompress;

const zstd = zlib as {
  createZstdDecompress?: (options?: zlib.ZlibOptions) => Decompressor;
  zstdDecompressSync?: (bytes: Buffer, options?: zlib.ZlibOptions) => Buffer;
};

/** Whether this Node has its own `zstd` (22.15 and later); without it, fzstd undoes it (upstream/zstd.ts). */
export const CAN_ZSTD = typeof zstd.createZstdDecompress === 'function' && typeof zstd.zstdDecompressSync === 'function';

const CHUNK_BYTES = 64 * 1024;
const EMPTY = Buffer.alloc(0);

interface Undoing {
  stream(truncated: boolean, limit: number): Decompressor | Transform;
  sync(bytes: Buffer, truncated: boolean, limit: number): Buffer;
}

interface CodingEntry extends Undoing {
  /** The names a Content-Encoding or Accept-Encoding may give it. */
  names: readonly string[];
  available: boolean;
  /** Tried when the input is not valid as the coding says. */
  orElse?: Undoing;
}

/** Other codings are not decoded (forwarded as sent, read as is); the upstream is offered only these, so the classifier can read it. */
const CODINGS: Record<Coding, CodingEntry> = {
  gzip: {
    names: ['gzip', 'x-gzip'],
    available: true,
    stream: (truncated) => zlib.createGunzip(zlibOptions(truncated)),
    sync: (bytes, truncated, limit) => zlib.gunzipSync(bytes, { ...zlibOptions(truncated), maxOutputLength: limit }),
  },
  deflate: {
    names: ['deflate'],
    available: true,
    stream: (truncated) => zlib.createInflate(zlibOptions(truncated)),
    sync: (bytes, truncated, limit) => zlib.inflateSync(bytes, { ...zlibOptions(truncated), maxOutputLength: limit }),
    // Some senders use raw deflate, without the zlib wrapper the coding names.
    orElse: {
      stream: (truncated) => zlib.createInflateRaw(zlibOptions(truncated)),
      sync: (bytes, truncated, limit) => zlib.inflateRawSync(bytes, { ...zlibOptions(truncated), maxOutputLength: limit }),
    },
  },
  br: {
    names: ['br'],
    available: true,
    stream: (truncated) => zlib.createBrotliDecompress(brotliOptions(truncated)),
    sync: (bytes, truncated, limit) => zlib.brotliDecompressSync(bytes, { ...brotliOptions(truncated), maxOutputLength: limit }),
  },
  // Node's own zstd where it has one (22.15 and later); else fzstd behind a check of its frames (upstream/zstd.ts).
  zstd: CAN_ZSTD
    ? {
        names: ['zstd'],
        available: true,
        stream: () => zstd.createZstdDecompress!({ chunkSize: CHUNK_BYTES }),
        sync: (bytes, _truncated, limit) => zstd.zstdDecompressSync!(bytes, { maxOutputLength: limit }),
      }
    : {
        names: ['zstd'],
        available: true,
        stream: (truncated, limit) => zstdDecodeStream(truncated, limit),
        sync: (bytes, truncated, limit) => zstdDecodeSync(bytes, limit, truncated),
      },
};

const BY_NAME = new Map<string, Coding>(
  (Object.entries(CODINGS) as Array<[Coding, CodingEntry]>)
    .filter(([, entry]) => entry.available)
    .flatMap(([coding, entry]) => entry.names.map((name) => [name, coding] as const)),
);

/** In the order applied (`identity` and empty entries skipped); null when one of them cannot be undone here. */
export function codingsOf(header: string | string[] | undefined): Coding[] | null {
  const value = Array.isArray(header) ? header.join(',') : header;
  if (!value) return [];
  const codings: Coding[] = [];
  for (const raw of value.split(',')) {
    const name = raw.trim().toLowerCase();
    if (name === '' || name === 'identity') continue;
    const coding = BY_NAME.get(name);
    if (coding === undefined) return null;
    codings.push(coding);
  }
  return codings;
}

/** The upstream must answer in a coding the classifier can read: `identity` and `*` stay; when nothing else is left, `identity`. */
export function acceptedByUs(acceptEncoding: string): string {
  const entries = acceptEncoding.split(',').map((entry) => entry.trim());
  const kept = entries.filter((entry) => {
    const name = entry.split(';', 1)[0].trim().toLowerCase();
    return name !== '' && (name === 'identity' || name === '*' || BY_NAME.has(name));
  });
  if (kept.length === entries.length) return acceptEncoding;
  return kept.length > 0 ? kept.join(', ') : 'identity';
}

/** Undoes the codings, last applied first, streaming, and stops at the bound. Never rejects. */
export async function decode(input: Buffer | readonly Buffer[], codings: readonly Coding[], options: DecodeOptions): Promise<Decoded> {
  let chunks: readonly Buffer[] = Buffer.isBuffer(input) ? [input] : input;
  let truncated = options.truncated === true;
  let outcome: Decoded['outcome'] = 'complete';
  for (let i = codings.length - 1; i >= 0; i--) {
    const stage = await undo(chunks, codings[i], { limit: options.limit, truncated });
    chunks = stage.chunks;
    if (stage.outcome === 'corrupt') return { bytes: join(chunks), outcome: 'corrupt' };
    if (stage.outcome === 'over') {
      outcome = 'over';
      // What was kept is a prefix of this stage's output: the next stage may still read it.
      if (!options.truncated) break;
      truncated = true;
    }
  }
  return { bytes: join(chunks), outcome };
}

interface Stage {
  chunks: Buffer[];
  outcome: Decoded['outcome'];
}

async function undo(input: readonly Buffer[], coding: Coding, options: Required<DecodeOptions>): Promise<Stage> {
  const entry = CODINGS[coding];
  const stage = await run(input, entry.stream(options.truncated, options.limit), options.limit);
  return stage.outcome === 'corrupt' && entry.orElse
    ? run(input, entry.orElse.stream(options.truncated, options.limit), options.limit)
    : stage;
}

function run(input: readonly Buffer[], stream: Decompressor | Transform, limit: number): Promise<Stage> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (outcome: Decoded['outcome']) => {
      if (settled) return;
      settled = true;
      // Stops the work still queued in the thread pool and frees zlib's memory.
      if (outcome !== 'complete') stream.destroy();
      resolve({ chunks, outcome });
    };
    stream.on('data', (chunk: Buffer) => {
      if (settled) return;
      const room = limit - size;
      if (chunk.length > room) {
        if (room > 0) chunks.push(chunk.subarray(0, room));
        size = limit;
        settle('over');
        return;
      }
      chunks.push(chunk);
      size += chunk.length;
    });
    stream.on('end', () => settle('complete'));
    // A zstd frame that says it is larger than the bound (upstream/zstd.ts) is over before any output.
    stream.on('error', (err: { code?: string }) => settle(err.code === 'ERR_BUFFER_TOO_LARGE' ? 'over' : 'corrupt'));
    for (const chunk of input) stream.write(chunk);
    stream.end();
  });
}

/** For the pass-through, whose decoded size has a limit: feed chunks, then `end()`; `over` as soon as any stage passes `limit`. */
export class DecodedSize {
  outcome: Decoded['outcome'] | undefined;
  private readonly stages: CountedStage[];
  private readonly done: Promise<Decoded['outcome']>;
  private settle!: (outcome: Decoded['outcome']) => void;

  constructor(codings: readonly Coding[], limit: number) {
    this.done = new Promise((resolve) => (this.settle = resolve));
    const finish = (outcome: Decoded['outcome']) => {
      if (this.outcome) return;
      this.outcome = outcome;
      for (const stage of this.stages) stage.stop();
      this.settle(outcome);
    };
    // Last applied, first undone: each stage feeds the next, and the last one's output is only counted.
    this.stages = [];
    let next: CountedStage | undefined;
    for (const coding of codings) {
      const stage: CountedStage = new CountedStage(coding, limit, next, finish);
      this.stages.unshift(stage);
      next = stage;
    }
  }

  write(chunk: Buffer): void {
    if (!this.outcome) this.stages[0]?.write(chunk);
  }

  end(): Promise<Decoded['outcome']> {
    if (this.stages.length === 0) return Promise.resolve('complete');
    this.stages[0].end();
    return this.done;
  }
}

/** One coding undone as bytes come, its output counted against the limit and handed to `next` (the coding applied before it). */
class CountedStage {
  private decoder: Decompressor | Transform | undefined;
  private head: Buffer[] = [];
  private size = 0;

  constructor(
    private readonly coding: Coding,
    private readonly limit: number,
    private readonly next: CountedStage | undefined,
    private readonly finish: (outcome: Decoded['outcome']) => void,
  ) {}

  write(chunk: Buffer): void {
    if (this.decoder) {
      this.decoder.write(chunk);
      return;
    }
    // Deflate comes with or without its zlib wrapper: its first two bytes say which.
    this.head.push(chunk);
    if (this.coding === 'deflate' && this.head.reduce((n, c) => n + c.length, 0) < 2) return;
    this.start();
  }

  end(): void {
    if (!this.decoder) this.start();
    this.decoder!.end();
  }

  stop(): void {
    this.decoder?.destroy();
  }

  private start(): void {
    const head = Buffer.concat(this.head);
    this.head = [];
    const entry = CODINGS[this.coding];
    const decoder = (this.coding === 'deflate' && !hasZlibWrapper(head) ? entry.orElse! : entry).stream(false, this.limit);
    this.decoder = decoder;
    decoder.on('data', (chunk: Buffer) => {
      this.size += chunk.length;
      if (this.size > this.limit) return this.finish('over');
      this.next?.write(chunk);
    });
    decoder.on('end', () => (this.next ? this.next.end() : this.finish('complete')));
    decoder.on('error', () => this.finish('corrupt'));
    if (head.length > 0) decoder.write(head);
  }
}

/** RFC 1950's header: compression method 8, a window of at most 32 KiB, a check that divides by 31. */
function hasZlibWrapper(head: Buffer): boolean {
  return head.length >= 2 && (head[0] & 0x0f) === 8 && head[0] >> 4 <= 7 && ((head[0] << 8) | head[1]) % 31 === 0;
}

/** A cut-off body ends without its trailer: flush what the decoder has instead of failing. */
function zlibOptions(truncated: boolean): zlib.ZlibOptions {
  return truncated ? { chunkSize: CHUNK_BYTES, finishFlush: zlib.constants.Z_SYNC_FLUSH } : { chunkSize: CHUNK_BYTES };
}

function brotliOptions(truncated: boolean): zlib.BrotliOptions {
  return truncated ? { chunkSize: CHUNK_BYTES, finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH } : { chunkSize: CHUNK_BYTES };
}

function join(chunks: readonly Buffer[]): Buffer {
  if (chunks.length === 0) return EMPTY;
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
}

/** At once: each stage makes at most `limit` bytes, which bounds its memory and time; past that the outcome is `over`, with nothing. */
export function decodeSync(input: Buffer, codings: readonly Coding[], options: DecodeOptions): Decoded {
  let bytes = input;
  try {
    for (let i = codings.length - 1; i >= 0; i--) bytes = undoSync(bytes, codings[i], options);
  } catch (err) {
    return { bytes: EMPTY, outcome: (err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' ? 'over' : 'corrupt' };
  }
  return { bytes, outcome: 'complete' };
}

function undoSync(bytes: Buffer, coding: Coding, { limit, truncated = false }: DecodeOptions): Buffer {
  const entry = CODINGS[coding];
  if (!entry.orElse) return entry.sync(bytes, truncated, limit);
  try {
    return entry.sync(bytes, truncated, limit);
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw err;
    return entry.orElse.sync(bytes, truncated, limit);
  }
}
