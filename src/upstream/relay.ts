import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Api } from '../dialects/types.js';
import type { GatewayError } from '../http/errors.js';
import { responseHeadersForClient } from './headers.js';
import { discard, drain, type HeldBody } from './body.js';

/** The only writer to the client on the chat route: before its first write the gateway may classify, compact, replay; after, not. */
export class ClientResponse {
  constructor(
    private readonly res: ServerResponse,
    private readonly requestId: string,
    /** The API whose error shape the gateway's own errors take. */
    private readonly api?: Api,
  ) {}

  /** Has any byte of the response (status line included) left for the client? */
  get committed(): boolean {
    return this.res.headersSent;
  }

  get gone(): boolean {
    return this.res.destroyed || this.res.writableEnded;
  }

  /** Status, end-to-end headers, the held bytes, then the rest as it arrives (backpressure through pipe; each chunk its own write). */
  async relay(
    answer: { status: number; headers: Record<string, string | string[] | undefined>; body: Readable },
    held: HeldBody,
    extra?: OutgoingHttpHeaders,
    /** Given the answer's last bytes (up to TAIL_BYTES) once it ended whole. */
    tail?: (bytes: Buffer) => void,
  ): Promise<void> {
    const headers = responseHeadersForClient(answer.headers, this.requestId);
    if (extra) Object.assign(headers, extra);
    this.res.writeHead(answer.status, headers);
    if (held.complete) {
      this.res.end(held.bytes);
      drain(answer.body);
      tail?.(held.bytes);
      return;
    }
    if (held.bytes.length > 0) this.res.write(held.bytes);
    const last = tail ? lastBytes(answer.body, held.bytes) : null;
    await pipeBody(answer.body, this.res);
    if (tail && last) tail(last());
  }

  /** The gateway's own error, in its API's shape. Only possible while nothing was sent. */
  sendError(err: GatewayError, extra: OutgoingHttpHeaders = {}): void {
    if (this.committed) {
      this.res.destroy(err);
      return;
    }
    const body = JSON.stringify(err.bodyFor(this.api));
    this.res.writeHead(err.status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'x-request-id': this.requestId,
      ...extra,
    });
    this.res.end(body);
  }
}

/** `body.pipe(res)` settled as `pipeline` settles, without its per-call AbortController and watchers (bench/findings.md). */
function pipeBody(body: Readable, res: ServerResponse): Promise<void> {
  return new Promise((resolve, reject) => {
    const settle = (err?: Error) => {
      body.off('error', settle);
      res.off('finish', finish).off('close', close);
      if (!err) return resolve();
      discard(body);
      res.destroy();
      reject(err);
    };
    const finish = () => settle();
    const close = () => settle(prematureClose());
    body.on('error', settle);
    res.on('finish', finish).on('close', close);
    body.pipe(res);
  });
}

/** The most of an answer's end kept for `tail`: a stream's usage comes in its last event or two. */
const TAIL_BYTES = 16 * 1024;

function lastBytes(body: Readable, held: Buffer): () => Buffer {
  let chunks: Buffer[] = held.length > 0 ? [held] : [];
  let size = held.length;
  body.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
    while (chunks.length > 1 && size - chunks[0].length >= TAIL_BYTES) size -= chunks.shift()!.length;
  });
  return () => {
    const all = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    chunks = [];
    return all.length > TAIL_BYTES ? all.subarray(all.length - TAIL_BYTES) : all;
  };
}

/** What `pipeline` rejects with when the client goes away mid-answer. */
function prematureClose(): Error {
  return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}
