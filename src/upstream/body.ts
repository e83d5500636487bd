import type { Readable } from 'node:stream';
import { DEFAULTS } from '../config/schema.js';
import { codingsOf, decode, decodeSync } from './content-coding.js';
import { fromUpstreamFailure } from '../http/errors.js';

export interface HeldBody {
  bytes: Buffer;
  /** True when the stream ended within the limit; otherwise the rest is still in the stream. */
  complete: boolean;
}

/** Leaves the stream paused at `limit` so the rest can be relayed (`for await` would destroy it on `break`); fails as the gateway does. */
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

/** undici reports an unfinished body's destruction as an 'error' event: with nobody listening it would be uncaught, so it is heard here. */
export function discard(body: Readable): void {
  body.on('error', ignore);
  body.destroy();
}

function ignore(): void {}

/** The first chunk is the whole body when the stream ended or it is as long as Content-Length says (known before 'end' is emitted). */
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

/** The first `limit` decoded bytes, where an error says what it is; unknown coding: the bytes as they are, corrupt: ''; never throws. */
export async function textOf(bytes: Buffer, contentEncoding: string | string[] | undefined, limit: number): Promise<string> {
  const codings = codingsOf(contentEncoding);
  if (codings === null || codings.length === 0) return bytes.toString('utf8');
  // Most answers are a few KB, decoded at once (bounded, so a millisecond or two at most); only
  // one that inflates past the bound is decoded again as a stream, for its first `limit` bytes.
  const atOnce = decodeSync(bytes, codings, { limit, truncated: true });
  const decoded = atOnce.outcome === 'over' ? await decode(bytes, codings, { limit, truncated: true }) : atOnce;
  return decoded.bytes.toString('utf8');
}

/** At once, for a caller that cannot wait: past `limit` decoded bytes it gives up (an empty text) rather than inflate a bomb. */
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
