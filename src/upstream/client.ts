import type { Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import { fromUpstreamFailure } from '../http/errors.js';
import { discard, holdBody } from './body.js';
import { Egress, type EgressSettings } from './egress.js';
import type { UpstreamTarget } from './target.js';
import type { Upstreams } from './upstreams.js';

/** A keep-alive pool per origin, each upstream's with its proxy, CA and timeouts; a summarizer elsewhere: `upstream.*`, the env's proxy. */
export function createEgress(config: Readonly<Config>, upstreams: Upstreams, env: Record<string, string | undefined>): Egress {
  const shared: EgressSettings = { ...config.upstream, proxy: config.upstream.proxy, caFile: undefined };
  const origins = new Map<string, EgressSettings>();
  for (const u of upstreams.all) if (!origins.has(u.target.origin)) origins.set(u.target.origin, u);
  const summarizerUrls = [config.summarizer.url, ...upstreams.all.map((u) => u.summarizer.url)];
  for (const url of summarizerUrls) if (url && !origins.has(new URL(url).origin)) origins.set(new URL(url).origin, shared);
  return new Egress(origins, shared, env);
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

/** For the gateway's own calls (the summarizer's): null past `limit` bytes; a body that fails first rejects as callUpstream does. */
export async function readText(answer: UpstreamAnswer, limit: number): Promise<string | null> {
  const held = await holdBody(answer.body, limit + 1);
  if (held.complete) return held.bytes.toString('utf8');
  discard(answer.body);
  return null;
}
