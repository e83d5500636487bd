import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { fromUpstreamFailure } from '../errors.js';

export interface HeldBody {
  /** The bytes read so far, exactly as the upstream sent them. */
  bytes: Buffer;
  /** True when the stream ended within the limit; otherwise the rest is still in the stream. */
  complete: boolean;
}

/**
 * Reads up to `limit` bytes and stops there, leaving the stream paused so the rest can still be
 * relayed. (A `for await` loop would destroy the stream on `break`.) A body that fails before
 * then (idle timeout, reset) rejects with the gateway's own error, as the call itself would.
 */
export function holdBody(body: Readable, limit: number): Promise<HeldBody> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (complete: boolean) => {
      body.off('data', onData).off('end', onEnd).off('error', onError);
      resolve({ bytes: chunks.length === 1 ? chunks[0] : Buffer.concat(chunks), complete });
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= limit) {
        body.pause();
        finish(false);
      }
    };
    const onEnd = () => finish(true);
    const onError = (err: Error) => {
      body.off('data', onData).off('end', onEnd).off('error', onError);
      reject(fromUpstreamFailure(err));
    };
    body.on('data', onData).on('end', onEnd).on('error', onError);
  });
}

/**
 * Drops what is left of an upstream body and aborts its request. undici's body reports an
 * unfinished stream's destruction as an 'error' event; with nobody listening any more, that
 * would be an uncaught exception, so it is heard and ignored here.
 */
export function discard(body: Readable): void {
  body.on('error', ignore);
  body.destroy();
}

function ignore(): void {}

/** Waits for the first chunk of a body (or its end), leaving the stream paused. */
export function firstChunk(body: Readable): Promise<HeldBody> {
  // Usually the first chunk came in with the headers and is buffered already: take it without a
  // promise and three listeners per request (13 µs in the benchmark's profile). A small answer
  // often came whole: then it is complete, and the relay ends the response with it instead of
  // piping an empty rest.
  const ready = body.readableLength > 0 ? (body.read() as Buffer | null) : null;
  if (ready) return Promise.resolve({ bytes: ready, complete: endedWithNothingLeft(body) });
  return holdBody(body, 1);
}

/**
 * True when the stream has received its end and holds nothing more. Node's readable state says
 * so (`ended`, set by `push(null)`) before the 'end' event, which comes on a later tick; when the
 * field is missing the answer is false, and the rest is piped as before.
 */
function endedWithNothingLeft(body: Readable): boolean {
  return body.readableLength === 0 && (body as { _readableState?: { ended?: boolean } })._readableState?.ended === true;
}

/**
 * Decodes a held (possibly truncated) error body as text for the classifier. Unknown encodings
 * and corrupt data give what could be decoded, never an exception.
 */
export function decodeText(bytes: Buffer, contentEncoding: string | string[] | undefined): string {
  const encoding = String(contentEncoding ?? '').trim().toLowerCase();
  // A truncated body is normal here: flush what the decoder has instead of failing.
  const opts = { finishFlush: zlib.constants.Z_SYNC_FLUSH };
  try {
    if (encoding === 'gzip' || encoding === 'x-gzip') return zlib.gunzipSync(bytes, opts).toString('utf8');
    if (encoding === 'deflate') return inflateEither(bytes);
    if (encoding === 'br') {
      return zlib.brotliDecompressSync(bytes, { finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH }).toString('utf8');
    }
    const zstd = (zlib as { zstdDecompressSync?: (b: Buffer) => Buffer }).zstdDecompressSync;
    if (encoding === 'zstd' && zstd) return zstd(bytes).toString('utf8');
  } catch {
    return '';
  }
  return bytes.toString('utf8');
}

function inflateEither(bytes: Buffer): string {
  const opts = { finishFlush: zlib.constants.Z_SYNC_FLUSH };
  try {
    return zlib.inflateSync(bytes, opts).toString('utf8');
  } catch {
    // Some servers send raw deflate without the zlib wrapper.
    return zlib.inflateRawSync(bytes, opts).toString('utf8');
  }
}
