import type { IncomingMessage } from 'node:http';
import { errorCodes } from 'fastify';
import { codingsOf, decode } from '../upstream/content-coding.js';

/** A request body as it was received, and when it came compressed, the same body decoded. */
export interface ReceivedBody {
  /** The chunks as Node's parser delivered them: what goes upstream on the first attempt. */
  chunks: Buffer[];
  /**
   * The body with its content codings undone, within the body limit: undefined when it had none,
   * null when they cannot be undone here (an unknown coding, corrupt data). Such a body is still
   * forwarded as sent; it just cannot be compacted.
   */
  decoded?: Buffer | null;
}

/**
 * Collects a request body as the chunks Node's HTTP parser delivered (each its own copy of the
 * socket's bytes), without joining them: the first attempt sends them upstream as they are, and
 * only a rescue joins them. fastify's `parseAs: 'buffer'` joined every body into a new buffer
 * (a 1 MiB copy per 1 MiB request, and as much external memory for V8's collector to chase).
 * The checks are fastify's own: the declared length against the limit before reading, the
 * received length against both after, the same error codes. A compressed body is decoded once it
 * is in, as a stream, and its decoded size has the same limit: a few KB of gzip can inflate to
 * gigabytes.
 */
export function collectBody(payload: IncomingMessage, limitBytes: number, done: (err: Error | null, body?: ReceivedBody) => void): void {
  const declared = Number(payload.headers['content-length']);
  if (declared > limitBytes) {
    done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    return;
  }
  const chunks: Buffer[] = [];
  let received = 0;
  const stop = () => {
    payload.off('data', onData).off('end', onEnd).off('error', onEnd);
  };
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (received > limitBytes) {
      stop();
      done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      return;
    }
    chunks.push(chunk);
  };
  const onEnd = (err?: Error & { statusCode?: number }) => {
    stop();
    if (err) {
      if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400;
      done(err);
      return;
    }
    if (!Number.isNaN(declared) && received !== declared) {
      done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
      return;
    }
    withDecoded(chunks, payload.headers['content-encoding'], limitBytes, done);
  };
  payload.on('data', onData).on('end', onEnd).on('error', onEnd);
  payload.resume();
}

/** Hands the body on, decoded first when it came compressed. */
function withDecoded(
  chunks: Buffer[],
  contentEncoding: string | undefined,
  limitBytes: number,
  done: (err: Error | null, body?: ReceivedBody) => void,
): void {
  const codings = contentEncoding === undefined ? [] : codingsOf(contentEncoding);
  if (codings === null) return done(null, { chunks, decoded: null });
  if (codings.length === 0) return done(null, { chunks });
  void decode(chunks, codings, { limit: limitBytes }).then(({ bytes, outcome }) => {
    if (outcome === 'over') done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    else done(null, { chunks, decoded: outcome === 'complete' ? bytes : null });
  });
}
