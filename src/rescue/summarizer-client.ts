import type { Dispatcher } from 'undici';
import { SummarizerError, type SendCall, type Summarizer } from '../compaction/summarizer-port.js';
import { boundsAfter, fitFor, type Bounds, type SizeTarget } from '../compaction/size-target.js';
import { pickHeaders } from '../dialects/parts.js';
import { DIALECTS } from '../dialects/index.js';
import type { SummarizerWire } from '../dialects/types.js';
import { GatewayError } from '../http/errors.js';
import { classifyResponse } from '../overlong/classify.js';
import { traceSummarizerCall } from '../telemetry/traces.js';
import { callUpstream, readText } from '../upstream/client.js';
import { CLIENT_CREDENTIALS } from '../upstream/headers.js';
import type { RescueContext } from './context.js';
import { identityOf } from './identity.js';
import { learnFrom } from './memory.js';
import { noCredentials, summarizerDestination } from './summarizer-credentials.js';
import { tryParseJson } from '../lib/json.js';

/** By default the upstream itself, in the request's API and with its own credentials. */
export function summarizerFor(ctx: RescueContext, target: SizeTarget): Summarizer {
  const destination = summarizerDestination(ctx.deps.config, ctx.deps.upstreams, ctx.upstream);
  const { url, credential } = destination;
  const served = destination.upstream?.apis;
  const api = destination.api ?? (served && !served.has(ctx.dialect.api) ? [...served][0] : ctx.dialect.api);
  const wire = DIALECTS[api].summarizer;
  const model = summarizerModel(ctx, destination);
  // The request's own credentials are its upstream's: never sent to another origin.
  const own =
    credential.kind === 'key'
      ? keyHeaders(wire.credential, credential.key)
      : credential.kind === 'request'
        ? requestCredentials(ctx)
        : noCredentials(ctx.deps.config, ctx.upstream, destination, ctx.log);
  const same = (a: string, b: string) => a.replace(/\/+$/, '') === b.replace(/\/+$/, '');
  const ownModel =
    same(url, ctx.upstream.url) &&
    api === ctx.dialect.api &&
    (destination.model === undefined || destination.model === identityOf(ctx).model);
  // The provider's own compaction is bound to the request's items: only the upstream itself can do it.
  const providerCompaction = ctx.deps.config.summarizer.providerCompaction && ownModel && credential.kind === 'request';
  const window = { bounds: ownModel ? (target.bounds ?? {}) : {}, bytesPerToken: target.bytesPerToken };
  const headers = { ...wire.headers(ctx.headers), ...own };
  return {
    wire,
    model,
    send: sendingTo({
      dispatcher: ctx.deps.dispatcher,
      url,
      model,
      wire,
      headers,
      windowLimit: ctx.deps.config.upstream.errorBodyLimitBytes,
      gone: ctx.gone.signal,
    }),
    providerCompaction,
    callFit: ownModel && target.bounds ? (tokens) => callFit(window.bounds, window.bytesPerToken, tokens) : undefined,
    refused: async (refusal) => {
      const verdict = classifyResponse({ status: refusal.status, body: refusal.body });
      if (!verdict.overlong) return null;
      const rejection = { reason: verdict.reason, limits: verdict.limits, bodyBytes: refusal.bytes, requested: refusal.maxTokens };
      const taught = boundsAfter(rejection, window.bounds);
      // The refused call is a bound too, and says how dense its tokens were.
      const room = (verdict.limits.limitTokens ?? 0) - refusal.maxTokens;
      const densest = room > 0 ? refusal.bytes / room : Infinity;
      window.bounds = { ...taught.bounds, refusedBytes: Math.min(refusal.bytes, taught.bounds.refusedBytes ?? Infinity) };
      window.bytesPerToken = Math.max(1, Math.min(taught.bytesPerToken, densest));
      if (ownModel) await learnFrom(ctx, verdict, refusal.bytes);
      ctx.log.info(
        { api: ctx.dialect.api, status: refusal.status, rule: verdict.rule },
        'the summarizer refused its call as too long; chunking again to what it said fits',
      );
      return (tokens) => callFit(window.bounds, window.bytesPerToken, tokens);
    },
  };
}

export function summarizerModel(
  ctx: RescueContext,
  destination = summarizerDestination(ctx.deps.config, ctx.deps.upstreams, ctx.upstream),
): string {
  return destination.model ?? identityOf(ctx).model ?? '';
}

export interface SummarizerEndpoint {
  dispatcher: Dispatcher;
  /** e.g. https://api.openai.com/v1. */
  url: string;
  model: string;
  wire: SummarizerWire;
  /** Never sent anywhere but `url`. */
  headers: Record<string, string>;
  windowLimit: number;
  gone: AbortSignal;
}

export function sendingTo(e: SummarizerEndpoint): SendCall {
  const base = e.url.replace(/\/+$/, '');
  return async (call, signal) => {
    const compact = call.kind === 'compact';
    const path = compact ? e.wire.compact?.path : e.wire.path(e.model);
    if (path === undefined) throw new SummarizerError('rejected', 'the API has no compaction of its own', 0);
    const url = new URL(`${base}${path}`);
    const headers = { 'content-type': 'application/json', accept: 'application/json', 'x-gateway-compaction': 'summarizer', ...e.headers };
    const traced = traceSummarizerCall({ url, model: e.model, wire: e.wire, compact, maxTokens: call.maxTokens }, headers);
    const ended = AbortSignal.any([e.gone, signal]);
    const limit = compact ? e.windowLimit : answerLimit(call.maxTokens);
    let status: number;
    let text: string;
    try {
      const answer = await callUpstream(e.dispatcher, {
        target: { origin: url.origin, basePath: '' },
        path: url.pathname + url.search,
        method: 'POST',
        headers: withoutBaggage(traced?.headers ?? headers),
        body: call.body,
        signal: ended,
      });
      const read = await readText(answer, limit);
      if (read === null) throw new SummarizerError('bad_response', `summarizer answer exceeded ${limit} bytes`, 0);
      status = answer.status;
      text = read;
    } catch (err) {
      traced?.failed(err);
      throw failureOf(err, e.gone, signal);
    }
    traced?.answered(status, () => e.wire.usage(tryParseJson(text)));
    return { status, text };
  };
}

/** A summary is a few thousand tokens; an answer far past that is not one. */
function answerLimit(maxTokens: number): number {
  return Math.max(64 * 1024, maxTokens * 16);
}

function failureOf(err: unknown, gone: AbortSignal, signal: AbortSignal): SummarizerError {
  if (err instanceof SummarizerError) return err;
  if (gone.aborted) return new SummarizerError('aborted', 'the client went away', 0, { cause: err });
  if (signal.aborted || (err instanceof GatewayError && err.code === 'upstream_timeout'))
    return new SummarizerError('timeout', 'the summarizer did not answer in time', 0, { cause: err });
  const cause = (err instanceof GatewayError ? err.cause : err) as { code?: unknown; message?: unknown } | undefined;
  const said = typeof cause?.code === 'string' && cause.code ? cause.code : String(cause?.message ?? err);
  return new SummarizerError('unreachable', `the summarizer could not be reached (${said})`, 0, { cause: err });
}

/**
 * The completion is counted whatever the rejection said: vLLM, OpenAI and Anthropic all refuse
 * prompt + max_tokens over the window.
 */
function callFit(bounds: Bounds, bytesPerToken: number, tokens: number): number {
  return fitFor({ ...bounds, completionCounted: true }, bytesPerToken, tokens);
}

/** A Gemini `?key=` as its header; Portkey's `x-portkey-*` routing headers go along, to the same upstream only. */
function requestCredentials(ctx: RescueContext): Record<string, string> {
  const headers = pickHeaders(ctx.headers, [
    ...CLIENT_CREDENTIALS,
    ...Object.keys(ctx.headers).filter((name) => name.startsWith('x-portkey-')),
  ]);
  const queryKey = ctx.clientHeaders['x-goog-api-key'];
  if (Object.keys(headers).length === 0 && typeof queryKey === 'string') headers['x-goog-api-key'] = queryKey;
  return headers;
}

function keyHeaders(style: SummarizerWire['credential'], key: string): Record<string, string> {
  return style === 'bearer' ? { authorization: `Bearer ${key}` } : { [style]: key };
}

/**
 * The propagator would write the caller's baggage (a user, a session) into every call, to a summarizer
 * that may be another provider.
 */
function withoutBaggage(headers: Record<string, string>): Record<string, string> {
  if (!('baggage' in headers)) return headers;
  const { baggage: _dropped, ...rest } = headers;
  return rest;
}
