import type { IncomingMessage } from 'node:http';
import { errorCodes } from 'fastify';
import { codingsOf, decode } from '../upstream/content-coding.js';

/** A request body as it was received, and when it came compressed, the same body decoded. */
export interface ReceivedBody {
  /** The chunks as Node's parser delivered them: what goes upstream on the first attempt. */
  chunks: Buffer[];
  /**
   * Content codings undone, within the limit: undefined when it had none, null when they cannot be undone here (it is still
   * forwarded, not compacted).
   */
  decoded?: Buffer | null;
}

/**
 * Kept as the parser's chunks, not joined: the first attempt sends them as they are and only a rescue joins them (fastify's `parseAs:
 * 'buffer'` copied every body once more). Fastify's own checks and error codes; a compressed body's decoded size has the same limit.
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
