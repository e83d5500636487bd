import { Agent, type Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import { fromUpstreamFailure } from '../errors.js';
import type { UpstreamTarget } from './target.js';

/** One keep-alive dispatcher for every upstream call the gateway makes. */
export function createDispatcher(upstream: Config['upstream']): Dispatcher {
  return new Agent({
    connect: { timeout: upstream.connectTimeoutMs },
    headersTimeout: upstream.firstByteTimeoutMs,
    bodyTimeout: upstream.idleTimeoutMs,
    keepAliveTimeout: 30_000,
    connections: null,
  });
}

export interface UpstreamCall {
  target: UpstreamTarget;
  path: string;
  method: 'POST' | 'GET';
  headers: Record<string, string | string[]>;
  /** One buffer, or a client's body as the chunks it arrived in (sent one by one, with its length). */
  body: Buffer | string | readonly Buffer[];
  /** Cancels the request: an AbortSignal, or an EventEmitter with `aborted` (see client-gone.ts). */
  signal: AbortSignal | (import('node:events').EventEmitter & { readonly aborted: boolean });
}

export interface UpstreamAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Dispatcher.ResponseData['body'];
  /** Milliseconds from sending the request to receiving the response headers. */
  ttfbMs: number;
}

function lengthOf(chunks: readonly Buffer[]): number {
  let length = 0;
  for (const chunk of chunks) length += chunk.length;
  return length;
}

/** Sends one request; undici failures come back as GatewayError (502/504), cause kept. */
export async function callUpstream(dispatcher: Dispatcher, call: UpstreamCall): Promise<UpstreamAnswer> {
  const started = performance.now();
  try {
    const chunked = typeof call.body !== 'string' && !Buffer.isBuffer(call.body);
    const res = await dispatcher.request({
      origin: call.target.origin,
      path: call.path,
      method: call.method,
      // undici sends an iterable body chunked unless told its length; the upstream gets one either way.
      headers: chunked ? { ...call.headers, 'content-length': String(lengthOf(call.body as readonly Buffer[])) } : call.headers,
      body: call.body as Buffer,
      signal: call.signal,
    });
    return { status: res.statusCode, headers: res.headers, body: res.body, ttfbMs: performance.now() - started };
  } catch (err) {
    if (call.signal.aborted) throw err;
    throw fromUpstreamFailure(err);
  }
}
