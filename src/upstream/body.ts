import type { Readable } from 'node:stream';
import { DEFAULTS } from '../config/schema.js';
import { codingsOf, decode, decodeSync } from './content-coding.js';
import { fromUpstreamFailure } from '../http/errors.js';

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

/**
 * Waits for the first chunk of a body (or its end), leaving the stream paused. That chunk is the
 * whole body when the stream has ended, or when it is as long as the answer's Content-Length
 * says: HTTP's own word, known before the stream emits 'end' (which it does only once read on).
 * A small answer usually comes whole with its headers, and is then relayed in one write.
 */
export function firstChunk(body: Readable, declaredLength = Number.NaN): Promise<HeldBody> {
  // Usually the first chunk came in with the headers and is buffered already: taken without a
  // promise and three listeners per request (bench/findings.md, "what each kept shortcut is worth").
  const ready = body.readableLength > 0 ? (body.read() as Buffer | null) : null;
  if (ready) return Promise.resolve({ bytes: ready, complete: body.readableEnded || ready.length === declaredLength });
  return holdBody(body, 1);
}

/** Lets a body whose bytes were all read run on to its end (an error after that is of no one's concern). */
export function drain(body: Readable): void {
  if (body.readableEnded) return;
  body.on('error', ignore);
  body.resume();
}

/**
 * A held (possibly cut-off) body as text for the classifier: at most `limit` decoded bytes, the
 * first ones, which is where an error says what it is. An unknown coding gives the bytes as they
 * are, corrupt data an empty text; never an exception. The client still gets the upstream's own
 * bytes: this text is only read.
 */
export async function textOf(bytes: Buffer, contentEncoding: string | string[] | undefined, limit: number): Promise<string> {
  const codings = codingsOf(contentEncoding);
  if (codings === null || codings.length === 0) return bytes.toString('utf8');
  // Most answers are a few KB, decoded at once (bounded, so a millisecond or two at most); only
  // one that inflates past the bound is decoded again as a stream, for its first `limit` bytes.
  const atOnce = decodeSync(bytes, codings, { limit, truncated: true });
  const decoded = atOnce.outcome === 'over' ? await decode(bytes, codings, { limit, truncated: true }) : atOnce;
  return decoded.bytes.toString('utf8');
}

/**
 * The same, at once, for a caller that cannot wait: past `limit` decoded bytes it gives up (an
 * empty text) rather than inflate a bomb.
 */
export function decodeText(
  bytes: Buffer,
  contentEncoding: string | string[] | undefined,
  limit: number = DEFAULTS.errorBodyLimitBytes,
): string {
  const codings = codingsOf(contentEncoding);
  if (codings === null || codings.length === 0) return bytes.toString('utf8');
  const decoded = decodeSync(bytes, codings, { limit, truncated: true });
  return decoded.outcome === 'complete' ? decoded.bytes.toString('utf8') : '';
}
