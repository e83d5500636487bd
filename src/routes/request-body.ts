import type { IncomingMessage } from 'node:http';
import { errorCodes } from 'fastify';

/**
 * Collects a request body as the chunks Node's HTTP parser delivered (each its own copy of the
 * socket's bytes), without joining them: the first attempt sends them upstream as they are, and
 * only a rescue joins them. fastify's `parseAs: 'buffer'` joined every body into a new buffer
 * (a 1 MiB copy per 1 MiB request, and as much external memory for V8's collector to chase).
 * The checks are fastify's own: the declared length against the limit before reading, the
 * received length against both after, the same error codes.
 */
export function collectBody(
  payload: IncomingMessage,
  limitBytes: number,
  done: (err: Error | null, body?: Buffer[]) => void,
): void {
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
    done(null, chunks);
  };
  payload.on('data', onData).on('end', onEnd).on('error', onEnd);
  payload.resume();
}
