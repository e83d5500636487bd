import { Transform } from 'node:stream';
import { Decompress } from 'fzstd';

/*
 * fzstd (pure JavaScript) for a Node before 22.15, behind a check of every frame's header: fzstd allocates the window or declared size
 * the header asks for (a 12-byte frame could ask for 2 GB), so frames past the bound or libzstd's 128 MiB window limit are refused.
 */

/** libzstd's default largest window a decoder accepts (ZSTD_WINDOWLOG_LIMIT_DEFAULT, 2^27). */
const MAX_WINDOW = 2 ** 27;
/** A window this large is allowed under any bound: compressors use 2-8 MiB windows (levels 3-19) whatever the input's size. */
const SMALLEST_WINDOW_ALLOWED = 8 * 1024 * 1024;
const FRAME_MAGIC = 0xfd2fb528;
const SKIPPABLE_MASK = 0xfffffff0;
const SKIPPABLE_MAGIC = 0x184d2a50;

/** Thrown from the decoder's callback to stop it at the bound. */
const ENOUGH = new Error('enough');

class ZstdError extends Error {
  readonly code = 'ERR_ZSTD_FRAME';
}

/** A frame that says more than `limit` is over before anything is decoded (an error whose code says so); a window too large is refused. */
function checkFrames(input: Buffer, limit: number, truncated: boolean): void {
  const most = Math.min(MAX_WINDOW, Math.max(limit, SMALLEST_WINDOW_ALLOWED));
  let at = 0;
  while (at < input.length) {
    if (input.length - at < 8) return shortOr(truncated);
    const magic = input.readUInt32LE(at);
    if ((magic & SKIPPABLE_MASK) >>> 0 === SKIPPABLE_MAGIC) {
      at += 8 + input.readUInt32LE(at + 4);
      continue;
    }
    if (magic !== FRAME_MAGIC) throw new ZstdError('not a zstd frame');
    const descriptor = input[at + 4];
    const single = (descriptor & 0x20) !== 0;
    const sizeFlag = descriptor >> 6;
    const dictBytes = [0, 1, 2, 4][descriptor & 3];
    const sizeBytes = [single ? 1 : 0, 2, 4, 8][sizeFlag];
    let p = at + 5;
    let window = 0;
    if (!single) {
      const wd = input[p++];
      const base = 2 ** ((wd >> 3) + 10);
      window = base + (base / 8) * (wd & 7);
    }
    p += dictBytes;
    if (p + sizeBytes > input.length) return shortOr(truncated);
    const size = sizeBytes === 0 ? undefined : readSize(input, p, sizeBytes);
    p += sizeBytes;
    if (single && size !== undefined) window = size;
    if (size !== undefined && size > limit) throw over();
    if (window > most) throw new ZstdError('a zstd frame whose window is larger than the bound');
    const end = blocksEnd(input, p);
    if (end === null) return shortOr(truncated);
    at = end + ((descriptor & 4) !== 0 ? 4 : 0);
  }
}

/** Where a frame's blocks end (after its last block), or null when the input ends first. */
function blocksEnd(input: Buffer, from: number): number | null {
  let p = from;
  for (;;) {
    if (p + 3 > input.length) return null;
    const header = input[p] | (input[p + 1] << 8) | (input[p + 2] << 16);
    const type = (header >> 1) & 3;
    if (type === 3) throw new ZstdError('a reserved zstd block type');
    p += 3 + (type === 1 ? 1 : header >>> 3);
    if ((header & 1) !== 0) return p;
  }
}

function readSize(input: Buffer, at: number, bytes: number): number {
  if (bytes === 1) return input[at];
  if (bytes === 2) return input.readUInt16LE(at) + 256;
  if (bytes === 4) return input.readUInt32LE(at);
  return Number(input.readBigUInt64LE(at));
}

/** The error zlib gives for output past maxOutputLength: the caller's sign of `over`. */
function over(): Error {
  return Object.assign(new Error('zstd output over the bound'), { code: 'ERR_BUFFER_TOO_LARGE' });
}

function shortOr(truncated: boolean): void {
  if (!truncated) throw new ZstdError('the zstd input ends inside a frame');
}

/** At once: the whole of `input`, at most `limit` bytes out, else an error whose code says it was over. */
export function zstdDecodeSync(input: Buffer, limit: number, truncated = false): Buffer {
  checkFrames(input, limit, truncated);
  const out: Buffer[] = [];
  let size = 0;
  const decoder = new Decompress((chunk) => {
    size += chunk.length;
    if (size > limit) throw over();
    out.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
  });
  decoder.push(input, !truncated);
  return out.length === 1 ? out[0] : Buffer.concat(out);
}

/** For decode(): the input is whole already; frames checked, then decoded, pieces pushed as they come; the caller stops at its bound. */
export function zstdDecodeStream(truncated: boolean, limit: number): Transform {
  const input: Buffer[] = [];
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      input.push(chunk);
      done();
    },
    flush(done) {
      try {
        const whole = input.length === 1 ? input[0] : Buffer.concat(input);
        checkFrames(whole, limit, truncated);
        let size = 0;
        const decoder = new Decompress((piece) => {
          // One byte past the bound tells the reader it was over; nothing more is made.
          const room = limit + 1 - size;
          size += piece.length;
          this.push(Buffer.from(piece.buffer, piece.byteOffset, Math.min(piece.length, room)));
          if (size > limit) throw ENOUGH;
        });
        decoder.push(whole, !truncated);
        done();
      } catch (err) {
        done(err === ENOUGH ? undefined : (err as Error));
      }
    },
  });
}
