import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  propagation,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/schema.js';
import type { RequestNotes } from '../http/request-notes.js';
import { APIS, DIALECTS, type Api } from '../dialects/index.js';
import type { SummarizerWire } from '../dialects/types.js';
import { tryParseJson } from '../lib/json.js';
import { pathOf } from '../lib/url.js';

/*
 * Opt-in (docs/telemetry.md). Off, the SDK is never loaded, no wrapper is installed, and every helper finds no span in the no-op
 * context and returns at once. No span carries conversation content: names, models, sizes, counts and statuses only.
 */

export function tracesUrl(telemetry: Config['telemetry']): string | undefined {
  if (telemetry.tracesEndpoint) return telemetry.tracesEndpoint;
  // As OTEL_EXPORTER_OTLP_ENDPOINT is read everywhere: a base URL, the signal's path appended.
  if (telemetry.otlpEndpoint) return `${telemetry.otlpEndpoint.replace(/\/+$/, '')}/v1/traces`;
  return undefined;
}

export interface Telemetry {
  /** Exports what is left (bounded in time) and stops. */
  shutdown(): Promise<void>;
}

/** Starts the SDK when tracing is on; off, resolves to null without loading it. */
export async function startTelemetry(config: Readonly<Config>, version: string, log: FastifyBaseLogger): Promise<Telemetry | null> {
  const url = tracesUrl(config.telemetry);
  if (!url) return null;
  const { startSdk } = await import('./sdk.js');
  return startSdk({ url, serviceName: config.telemetry.serviceName, version, log });
}

/** The API's proxy: a no-op until the SDK registers its provider. */
const tracer = trace.getTracer('compaction-gateway');

type Listener = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * A client's `traceparent` is the parent; req and res are bound to the span's context so the route, rescue and summarizer find it.
 * Ends at close.
 */
export function tracedRequests(serve: Listener, skip: (path: string) => boolean): Listener {
  return (req, res) => {
    // The path only: a query may hold a key (Gemini's `?key=`).
    const path = pathOf(req.url ?? '/');
    if (skip(path)) return serve(req, res);
    const method = req.method ?? 'GET';
    const parent = propagation.extract(ROOT_CONTEXT, req.headers);
    const attributes: Attributes = { 'http.request.method': method, 'url.path': path, 'url.scheme': 'http' };
    if (req.socket.remoteAddress) attributes['client.address'] = req.socket.remoteAddress;
    if (typeof req.headers['user-agent'] === 'string') attributes['user_agent.original'] = req.headers['user-agent'];
    const span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes }, parent);
    const active = trace.setSpan(parent, span);
    res.once('close', () => endServerSpan(span, res));
    context.bind(active, req);
    context.bind(active, res);
    context.with(active, serve, undefined, req, res);
  };
}

function endServerSpan(span: Span, res: ServerResponse): void {
  const status = res.statusCode;
  span.setAttribute('http.response.status_code', status);
  // A server span fails on the gateway's side only: a 4xx is the client's.
  if (status >= 500) {
    span.setAttribute('error.type', String(status));
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

function serverSpan(): Span | undefined {
  const span = trace.getActiveSpan();
  return span?.isRecording() ? span : undefined;
}

export function noteRequested(api: Api, model: string | undefined): void {
  serverSpan()?.setAttributes(genAi(api, model));
}

/** What the request log says of the route and the upstream, on the server span (server.ts recordRequest). */
export function noteRecorded(method: string, notes: RequestNotes | null): void {
  const span = serverSpan();
  if (!span || !notes) return;
  // The route label is a template (`/v1/chat/completions`), or a pass-through's family (`passthrough_models`).
  if (notes.route.startsWith('/')) {
    span.updateName(`${method} ${notes.route}`);
    span.setAttribute('http.route', notes.route);
  }
  span.setAttribute('gateway.route', notes.route);
  if (notes.upstream) span.setAttribute('gateway.upstream.name', notes.upstream);
}

/** What one rescue did, as its `x-gateway-compaction` header says it, on the server span. */
export function noteRescue(record: { remedy?: string; compaction?: { outcome: string; summarizerCalls: number } }, header: string): void {
  const span = serverSpan();
  if (!span) return;
  const attributes: Attributes = { 'gateway.compaction.summarizer_calls': record.compaction?.summarizerCalls ?? 0 };
  if (record.remedy) attributes['gateway.compaction.remedy'] = record.remedy;
  // The header is an RFC 8941 dictionary of tokens and integers (report.ts): each member an attribute.
  for (const member of header.split(', ')) {
    const eq = member.indexOf('=');
    if (eq <= 0) continue;
    const value = member.slice(eq + 1);
    attributes[`gateway.compaction.${member.slice(0, eq).replaceAll('-', '_')}`] = /^-?\d+$/.test(value) ? Number(value) : value;
  }
  // The semantic conventions' flag: set only when a compacted conversation went upstream, never false.
  if (record.compaction?.outcome === 'compacted') attributes['gen_ai.conversation.compacted'] = true;
  span.setAttributes(attributes);
}

/** One call the gateway makes, as a span: the headers to send with it, and how it ended. */
interface CallTrace<H> {
  /** The call's headers, with its own span's `traceparent` in place of the client's. */
  headers: H;
  failed(err: unknown): void;
}

export interface AttemptTrace extends CallTrace<Record<string, string | string[]>> {
  /** The answer as judged; the span ends when its body closes (a relayed stream, at its end). */
  answered(answer: JudgedAnswer): void;
}

interface JudgedAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Readable;
  /** What was read before judging, and whether that was the whole body. */
  held: { bytes: Buffer; complete: boolean };
  overlong: boolean;
  rule: string;
}

export interface Attempt {
  api: Api;
  model: string | undefined;
  upstream: string;
  origin: string;
  /** The gateway rewrote the request (a replay, or compacted ahead), and whether a compacted conversation is what it carries. */
  rewritten: boolean;
  compacted: boolean;
  /** The tokens a whole JSON answer reports (the dialect's reading). */
  usage: SummarizerWire['usage'];
}

export function traceAttempt(a: Attempt, headers: Record<string, string | string[]>): AttemptTrace | null {
  const parent = tracedContext();
  if (!parent) return null;
  const attributes: Attributes = {
    ...genAi(a.api, a.model),
    ...serverAddress(a.origin),
    'gateway.upstream.name': a.upstream,
    'gateway.attempt.rewritten': a.rewritten,
  };
  if (a.compacted) attributes['gen_ai.conversation.compacted'] = true;
  const span = tracer.startSpan(callName(DIALECTS[a.api].telemetry.operation, a.model), { kind: SpanKind.CLIENT, attributes }, parent);
  const end = ending(span);
  return {
    headers: withTraceparent(headers, trace.setSpan(parent, span)),
    answered: (answer) => {
      if (end.done) return;
      setStatus(span, answer.status);
      if (answer.overlong) span.setAttributes({ 'gateway.overlong': true, 'gateway.overlong.rule': answer.rule });
      // Usage only from an answer already held whole as JSON: a stream is never read for it.
      const type = String(answer.headers['content-type'] ?? '');
      const held = answer.held;
      if (held.complete && answer.status < 400 && type.includes('json') && answer.headers['content-encoding'] === undefined) {
        setUsage(span, () => a.usage(tryParseJson(held.bytes.toString('utf8'))));
      }
      const body = answer.body;
      if (body.destroyed) end();
      else body.once('close', end);
    },
    failed: (err) => end(() => setFailure(span, err)),
  };
}

export interface SummarizerTrace extends CallTrace<Record<string, string>> {
  /** The call's answer (its body already read whole); `usage` reads its token counts. */
  answered(status: number, usage: () => { input: number; output: number } | undefined): void;
}

export interface SummarizerCall {
  url: URL;
  model: string;
  wire: SummarizerWire;
  /** The provider's own compaction endpoint rather than a summary. */
  compact: boolean;
  maxTokens: number;
}

export function traceSummarizerCall(c: SummarizerCall, headers: Record<string, string>): SummarizerTrace | null {
  const parent = tracedContext();
  if (!parent) return null;
  // The wire is one API's dialect's (chat completions' names for one of none).
  const api = APIS.find((a) => DIALECTS[a].summarizer === c.wire) ?? 'chat';
  const operation = c.compact ? 'compact' : DIALECTS[api].telemetry.operation;
  const attributes: Attributes = {
    ...genAi(api, c.model),
    'gen_ai.operation.name': operation,
    ...serverAddress(c.url.origin),
    'gateway.summarizer': true,
  };
  if (c.maxTokens > 0) attributes['gen_ai.request.max_tokens'] = c.maxTokens;
  const span = tracer.startSpan(callName(operation, c.model), { kind: SpanKind.CLIENT, attributes }, parent);
  const end = ending(span);
  return {
    headers: withTraceparent(headers, trace.setSpan(parent, span)),
    answered: (status, usage) =>
      end(() => {
        setStatus(span, status);
        if (status < 400) setUsage(span, usage);
      }),
    failed: (err) => end(() => setFailure(span, err)),
  };
}

/** The GenAI conventions' values for a call in the API (its dialect's); the provider is the API's (the upstream's own name is ours). */
function genAi(api: Api, model: string | undefined): Attributes {
  const names = DIALECTS[api].telemetry;
  const attributes: Attributes = { 'gen_ai.operation.name': names.operation, 'gen_ai.provider.name': names.provider };
  if (model) attributes['gen_ai.request.model'] = model;
  if (names.openaiApiType) attributes['openai.api.type'] = names.openaiApiType;
  return attributes;
}

/** `{gen_ai.operation.name} {gen_ai.request.model}`, as the conventions name a model call. */
function callName(operation: string, model: string | undefined): string {
  return model ? `${operation} ${model}` : operation;
}

function serverAddress(origin: string): Attributes {
  const url = new URL(origin);
  const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
  return { 'server.address': url.hostname, 'server.port': port };
}

/** The call's headers with the span's trace context in place of whatever the client sent. */
function withTraceparent<H extends Record<string, string | string[]>>(headers: H, active: Context): H {
  const out: Record<string, string | string[]> = { ...headers };
  delete out.traceparent;
  delete out.tracestate;
  propagation.inject(active, out);
  return out as H;
}

/** Null when tracing is off or the span is the API's invalid stand-in (no SDK registered): the call goes as it is. */
function tracedContext(): Context | null {
  const active = context.active();
  const span = trace.getSpan(active);
  return span && trace.isSpanContextValid(span.spanContext()) ? active : null;
}

/** Ends the span once, whichever way the call ends first; `last` runs only then. */
function ending(span: Span): ((last?: () => void) => void) & { done: boolean } {
  const end = (last?: () => void) => {
    if (end.done) return;
    end.done = true;
    last?.();
    span.end();
  };
  end.done = false;
  return end;
}

function setStatus(span: Span, status: number): void {
  span.setAttribute('http.response.status_code', status);
  if (status >= 400) {
    span.setAttribute('error.type', String(status));
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
}

/** A call that got no answer: its error's code (UND_ERR_*, a GatewayError's, a summarizer failure's kind), never its text. */
function setFailure(span: Span, err: unknown): void {
  const e = err as { code?: unknown; kind?: unknown; name?: unknown } | undefined;
  const type = [e?.kind, e?.code, e?.name].find((v): v is string => typeof v === 'string' && v.length > 0 && v !== 'Error') ?? '_OTHER';
  span.setAttribute('error.type', type);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

function setUsage(span: Span, usage: () => { input: number; output: number } | undefined): void {
  const tokens = usage();
  if (tokens) span.setAttributes({ 'gen_ai.usage.input_tokens': tokens.input, 'gen_ai.usage.output_tokens': tokens.output });
}
