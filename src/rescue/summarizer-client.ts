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

/*
 * The summarizer a compaction gets (compaction/summarizer-port.ts): where its calls go, with which
 * credentials, sized to what is known of its window; and each call sent through the one upstream
 * client, ended when the client leaves, traced, its answer read within a bound.
 */

/**
 * Where summaries come from: the configured summarizer, or by default the upstream itself in the
 * API of the request being rescued, with the request's own credentials. When it is the upstream's
 * own model, its calls are sized to what `target` knows of that model's window.
 */
export function summarizerFor(ctx: RescueContext, target: SizeTarget): Summarizer {
  const destination = summarizerDestination(ctx.deps.config, ctx.deps.upstreams, ctx.upstream);
  const { url, credential } = destination;
  // Another upstream by name speaks one of its own APIs: the request's when it serves it.
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
  // The provider's own compaction reads the request's own items and its window is bound to them:
  // only the upstream itself, in the request's API, model and credentials.
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
    // A refusal as overlong teaches the summarizer's window; the upstream's own model keeps the lesson.
    refused: async (refusal) => {
      const verdict = classifyResponse({ status: refusal.status, body: refusal.body });
      if (!verdict.overlong) return null;
      const rejection = { reason: verdict.reason, limits: verdict.limits, bodyBytes: refusal.bytes, requested: refusal.maxTokens };
      const taught = boundsAfter(rejection, window.bounds);
      // The refused call itself is a bound too (a stated window drops it from what a request
      // learns), and it says how dense its tokens were: its prompt took more than the window left.
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

/** The model a request's summarizer calls name: the configured one, else the request's own ('' when it names none). */
export function summarizerModel(
  ctx: RescueContext,
  destination = summarizerDestination(ctx.deps.config, ctx.deps.upstreams, ctx.upstream),
): string {
  return destination.model ?? identityOf(ctx).model ?? '';
}

/** Where one summarizer's calls go, and what ends them. */
export interface SummarizerEndpoint {
  /** The gateway's one dispatcher (upstream/client.ts createEgress). */
  dispatcher: Dispatcher;
  /** The API's base URL, e.g. https://api.openai.com/v1. */
  url: string;
  model: string;
  wire: SummarizerWire;
  /** Headers that authenticate the call (never sent anywhere but `url`), and any the API requires. */
  headers: Record<string, string>;
  /** The most bytes of a provider compaction's answer read (upstream.errorBodyLimitBytes). */
  windowLimit: number;
  /** The client leaving: every call in flight ends, as `aborted`. */
  gone: AbortSignal;
}

/** Each call a POST through the upstream client, marked as the gateway's own; its answer read whole, within a bound. */
export function sendingTo(e: SummarizerEndpoint): SendCall {
  const base = e.url.replace(/\/+$/, '');
  return async (call, signal) => {
    const compact = call.kind === 'compact';
    const path = compact ? e.wire.compact?.path : e.wire.path(e.model);
    if (path === undefined) throw new SummarizerError('rejected', 'the API has no compaction of its own', 0);
    const url = new URL(`${base}${path}`);
    const headers = { 'content-type': 'application/json', accept: 'application/json', 'x-gateway-compaction': 'summarizer', ...e.headers };
    // A traced request's summarizer call is a span of its own, and carries its traceparent (not the caller's baggage).
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

/** A failed call in the summarizer's words: the client's leaving first, then the call's own end, then what the upstream client said. */
function failureOf(err: unknown, gone: AbortSignal, signal: AbortSignal): SummarizerError {
  if (err instanceof SummarizerError) return err;
  if (gone.aborted) return new SummarizerError('aborted', 'the client went away', 0, { cause: err });
  if (signal.aborted || (err instanceof GatewayError && err.code === 'upstream_timeout'))
    return new SummarizerError('timeout', 'the summarizer did not answer in time', 0, { cause: err });
  // What undici said, as the upstream client kept it.
  const cause = (err instanceof GatewayError ? err.cause : err) as { code?: unknown; message?: unknown } | undefined;
  const said = typeof cause?.code === 'string' && cause.code ? cause.code : String(cause?.message ?? err);
  return new SummarizerError('unreachable', `the summarizer could not be reached (${said})`, 0, { cause: err });
}

/**
 * What fits one summarizer call: its completion is counted whatever the rejection's words said
 * (vLLM, OpenAI and Anthropic all refuse prompt + max_tokens over the window; a rejection that
 * names only the prompt does not say they do not).
 */
function callFit(bounds: Bounds, bytesPerToken: number, tokens: number): number {
  return fitFor({ ...bounds, completionCounted: true }, bytesPerToken, tokens);
}

/**
 * The credentials the request went upstream with; a Gemini key sent as `?key=` as the header it
 * stands for. A gateway in front (Portkey) reads its own key and routing from `x-portkey-*`
 * headers: they go along too, to the same upstream only.
 */
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
 * The call's headers without W3C baggage: the trace context the call carries is the gateway's own
 * span, but a traced request's context also holds the caller's baggage (its own key-values: a
 * user, a session), which the propagator would write into every call, to a summarizer that may be
 * another provider.
 */
function withoutBaggage(headers: Record<string, string>): Record<string, string> {
  if (!('baggage' in headers)) return headers;
  const { baggage: _dropped, ...rest } = headers;
  return rest;
}
