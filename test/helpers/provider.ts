import type { ServerResponse } from 'node:http';
import zlib from 'node:zlib';
import { decompress as zstdDecompress } from 'fzstd';
import { json, startFakeUpstream, type FakeUpstream, type Handler, type Received } from './fake-upstream.js';
import { NGINX_413 } from './nginx.js';
import type { Api } from '../../src/dialects/types.js';
import { startHostileStandIn, type HostileStandIn } from './hostile-standin.js';
import {
  startStrictAnthropic,
  strictAnthropicRules,
  type BindingCheck,
  type StrictAnthropic,
  type StrictAnthropicOptions,
  type StrictAnthropicReject,
} from './strict-anthropic.js';
import { startStrictChat, strictChatRules, type StrictChat, type StrictChatOptions, type StrictChatReject } from './strict-chat.js';
import {
  startStrictGemini,
  strictGeminiRules,
  type StrictGemini,
  type StrictGeminiOptions,
  type StrictGeminiReject,
} from './strict-gemini.js';
import { startLlamaCpp, type LlamaCpp, type LlamaCppOptions } from './strict-llamacpp.js';
import { startOllama, type OllamaOptions, type OllamaStandIn } from './strict-ollama.js';
import {
  startStrictResponses,
  strictResponsesRules,
  type StrictResponses,
  type StrictResponsesOptions,
  type StrictResponsesReject,
} from './strict-responses.js';
import { startWindowedProvider, type WindowedProvider, type WindowedProviderOptions } from './windowed-provider.js';

export { NGINX_413 };

// ---------------------------------------------------------------------------------------------
// The stand-in: one declarative provider for every API the gateway speaks

/*
 * One loopback server with a route per API, each route the strict rules of its API (the
 * provider's checks and exact errors: tool pairs, alternation, signed thinking and encrypted
 * reasoning bound to their prefix, thought signatures, the window), and a script of answers
 * a test declares ahead (a JSON answer, or a stream of events that may wait for the client and
 * end or be cut) served to model calls, in order, before the rules answer the rest. A refusal is
 * declared by the one thing tests care about: how the provider says "too long".
 */

export type { Api };

/** How "too long" is said: a 400 (that states the window, where the API does), an edge's 413 page, or an error inside a 200 stream. */
export type TooLong = 'stated' | 'page' | 'in_stream';

/** A tool call in any API's words; the stand-in writes it as the API does. */
export interface Reply {
  text?: string;
  call?: { id: string; name: string; args: Record<string, unknown> };
}

export type Scripted =
  | { status: number; json: unknown; headers?: Record<string, string> }
  | {
      /** SSE events, one write each. */
      events: string[];
      /** Wait for this after writing the first `pause.after` events (bounded by the test). */
      pause?: { after: number; until: Promise<void> };
      /** How the stream ends: cleanly, or with the connection cut. */
      end?: 'end' | 'reset';
    };

export interface StandInOptions {
  /** Bodies larger than this are over the window (limitBytes / 4 tokens). Default: no limit. */
  limitBytes?: number;
  tooLong?: TooLong;
  /** What the model says to the n-th (1-based) answered model call of `api`. Default: text. */
  reply?: (api: Api, n: number, req: Received) => Reply;
  /** How the summarizer's calls are answered instead of by the rules: scripted (the same answer, or one made from each call, when it is ready), or never. */
  summarizer?: Scripted | ((req: Received) => Scripted | Promise<Scripted>) | 'hang';
  /** Waits for this before answering a model call (a slow model: a request in flight while the caller does something else). */
  hold?: (req: Received) => Promise<void> | undefined;
}

export interface StandIn extends FakeUpstream {
  /** Model calls (the summarizer's excepted) of one API, or of all. */
  calls(api?: Api): Received[];
  summarizerCalls(): Received[];
  /** What the rules answered each model call of `api` with: the refusal's message, or null. */
  verdicts(api: Api): Array<string | null>;
  /** Messages API only: what the binding check saw of each model call. */
  bindingChecks(): BindingCheck[];
  /** Queues answers for the next model calls, before the rules: each as declared, or made from the call it answers. */
  script(...answers: Array<Scripted | ((req: Received) => Scripted)>): void;
  /** The bytes of the answer's body to a request, as written. */
  answerBytes(req: Received): Buffer;
  /** The headers of the answer to a request, once it ended. */
  answerHeaders(req: Received): Record<string, unknown>;
  /** The status of the answer to a request, once its head was written. */
  answerStatus(req: Received): number | undefined;
}

const STYLES: { [A in Api]: Record<TooLong, string> } = {
  chat: { stated: 'context_length', page: 'edge_413', in_stream: 'sse_in_band' } satisfies Record<TooLong, StrictChatReject>,
  responses: { stated: 'context_length', page: 'edge_413', in_stream: 'stream_failed' } satisfies Record<TooLong, StrictResponsesReject>,
  messages: { stated: 'prompt_too_long', page: 'edge_413', in_stream: 'sse_error' } satisfies Record<TooLong, StrictAnthropicReject>,
  gemini: { stated: 'invalid_argument', page: 'edge_413', in_stream: 'stream_error' } satisfies Record<TooLong, StrictGeminiReject>,
};

/** The API a request is for, by its path. */
export function apiOf(url: string): Api | null {
  const path = url.split('?')[0];
  if (path.startsWith('/v1beta/models/')) return 'gemini';
  if (path.endsWith('/chat/completions')) return 'chat';
  if (/\/responses(\/compact)?$/.test(path)) return 'responses';
  if (path.endsWith('/messages')) return 'messages';
  return null;
}

const summarizing = (r: Received) => r.headers['x-gateway-compaction'] === 'summarizer';

/**
 * One provider alone, with everything its rules report (the thinking blocks it signed, the keys it
 * was sent, the prompt it rendered): `startStandIn({ provider: 'ollama', ... })`. The hosted APIs'
 * are the same rules the four-API stand-in routes to; the local servers' (Ollama, llama.cpp, vLLM
 * and the other OpenAI-compatible ones) have their windows and wordings; `hostile` is the
 * chat provider the hostile-load tests drive with bodies of tens of megabytes.
 */
export interface Providers {
  anthropic: [StrictAnthropicOptions, StrictAnthropic];
  responses: [StrictResponsesOptions, StrictResponses];
  chat: [StrictChatOptions, StrictChat];
  gemini: [StrictGeminiOptions, StrictGemini];
  ollama: [OllamaOptions, OllamaStandIn];
  llamacpp: [LlamaCppOptions, LlamaCpp];
  windowed: [WindowedProviderOptions, WindowedProvider];
  hostile: [{ limitBytes?: number }, HostileStandIn];
}

export type Provider = keyof Providers;

const ALONE: { [P in Provider]: (options: Providers[P][0]) => Promise<Providers[P][1]> } = {
  anthropic: startStrictAnthropic,
  responses: startStrictResponses,
  chat: startStrictChat,
  gemini: startStrictGemini,
  ollama: startOllama,
  llamacpp: startLlamaCpp,
  windowed: startWindowedProvider,
  hostile: (o) => startHostileStandIn(o.limitBytes),
};

/** The stand-in of every API (the default), or of one provider alone (`provider`). */
export function startStandIn<P extends Provider>(options: { provider: P } & Providers[P][0]): Promise<Providers[P][1]>;
export function startStandIn(options?: StandInOptions): Promise<StandIn>;
export function startStandIn(options: StandInOptions | ({ provider: Provider } & Record<string, unknown>) = {}): Promise<unknown> {
  if ('provider' in options) {
    const { provider, ...rest } = options;
    return (ALONE[provider] as (o: unknown) => Promise<unknown>)(rest);
  }
  return startEveryApi(options);
}

async function startEveryApi(options: StandInOptions): Promise<StandIn> {
  const tooLong = options.tooLong ?? 'stated';
  const counts: Record<Api, number> = { chat: 0, responses: 0, messages: 0, gemini: 0 };
  const reply = (api: Api) => (req: Received) => options.reply?.(api, ++counts[api], req) ?? {};
  const chat = strictChatRules({
    limitBytes: options.limitBytes,
    style: STYLES.chat[tooLong] as StrictChatReject,
    reply: (req) => {
      const { text, call } = reply('chat')(req);
      return { text, toolCall: call && { id: call.id, name: call.name, arguments: JSON.stringify(call.args) } };
    },
  });
  const responses = strictResponsesRules({
    limitBytes: options.limitBytes,
    style: STYLES.responses[tooLong] as StrictResponsesReject,
    reply: (req) => {
      const { text, call } = reply('responses')(req);
      return { text, call: call && { call_id: call.id, name: call.name, arguments: JSON.stringify(call.args) } };
    },
  });
  const messages = strictAnthropicRules({
    limitBytes: options.limitBytes,
    style: STYLES.messages[tooLong] as StrictAnthropicReject,
    reply: (req) => {
      const { text, call } = reply('messages')(req);
      return { text, toolUse: call && { id: call.id, name: call.name, input: call.args } };
    },
  });
  const gemini = strictGeminiRules({
    limitBytes: options.limitBytes,
    style: STYLES.gemini[tooLong] as StrictGeminiReject,
    reply: (req) => {
      const { text, call } = reply('gemini')(req);
      return { text, functionCall: call };
    },
  });
  const routes: Record<Api, Handler> = { chat: chat.handle, responses: responses.handle, messages: messages.handle, gemini: gemini.handle };
  const script: Array<Scripted | ((req: Received) => Scripted)> = [];
  const written = new Map<Received, Buffer[]>();
  const headers = new Map<Received, Record<string, unknown>>();
  const statuses = new Map<Received, number>();

  const upstream = await startFakeUpstream(async (req, res, raw) => {
    written.set(req, []);
    headers.set(req, {});
    record(res, written.get(req)!, headers.get(req)!, (status) => statuses.set(req, status));
    const api = apiOf(req.url);
    if (api === null && req.method === 'GET' && req.url.split('?')[0] === '/v1/models') return json(res, 200, modelList(req));
    if (api === 'gemini' && req.method === 'GET') return json(res, 200, geminiModel(req.url, options.limitBytes));
    if (api === null) return json(res, 404, { error: { message: `no route for ${req.method} ${req.url}` } });
    const summarizer = summarizing(req) ? options.summarizer : undefined;
    if (summarizer === 'hang') return;
    if (summarizer) return play(res, typeof summarizer === 'function' ? await summarizer(req) : summarizer);
    if (!summarizing(req)) await options.hold?.(req);
    const next = summarizing(req) ? undefined : script.shift();
    if (next) return play(res, typeof next === 'function' ? next(req) : next);
    return routes[api](decodedBody(req), res, raw);
  });

  const verdicts: Record<Api, () => Array<string | null>> = {
    chat: () => chat.checks().map((c) => c.refused),
    responses: () => responses.checks().map((c) => c.refused),
    messages: () => messages.checks().map((c) => c.refused),
    gemini: () => gemini.checks().map((c) => c.refused),
  };
  return {
    ...upstream,
    calls: (api) =>
      upstream.received.filter(
        (r) => r.method === 'POST' && !summarizing(r) && apiOf(r.url) !== null && (api === undefined || apiOf(r.url) === api),
      ),
    summarizerCalls: () => upstream.received.filter(summarizing),
    verdicts: (api) => verdicts[api](),
    bindingChecks: messages.checks,
    script: (...answers) => void script.push(...answers),
    answerBytes: (req) => Buffer.concat(written.get(req) ?? []),
    answerHeaders: (req) => headers.get(req) ?? {},
    answerStatus: (req) => statuses.get(req),
  };
}

/**
 * The request as the API reads it: a body sent with a Content-Encoding (Codex sends zstd, others
 * gzip) is decoded first, as the providers' front ends do; its window is the decoded body's.
 */
function decodedBody(req: Received): Received {
  const coding = String(req.headers['content-encoding'] ?? '')
    .trim()
    .toLowerCase();
  if (coding === '' || coding === 'identity') return req;
  const undo: Record<string, (b: Buffer) => Buffer> = {
    gzip: (b) => zlib.gunzipSync(b),
    deflate: (b) => zlib.inflateSync(b),
    br: (b) => zlib.brotliDecompressSync(b),
    zstd: (b) => Buffer.from(zstdDecompress(b)),
  };
  const body = undo[coding]?.(req.body);
  if (!body) return req;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    parsed = undefined;
  }
  return { ...req, body, json: parsed };
}

/** GET /v1/models as the provider lists its models: Anthropic's page when the call carries anthropic-version, else OpenAI's list. */
function modelList(req: Received): unknown {
  if (req.headers['anthropic-version']) {
    return {
      data: [{ type: 'model', id: 'claude-test', display_name: 'Claude Test', created_at: '2026-01-01T00:00:00Z' }],
      has_more: false,
      first_id: 'claude-test',
      last_id: 'claude-test',
    };
  }
  return { object: 'list', data: [{ id: 'fake-model', object: 'model', created: 1_700_000_000, owned_by: 'system' }] };
}

/**
 * Gemini's models.get (GET /v1beta/models/{model}): the model's card, its `inputTokenLimit` the
 * window the rules refuse past (limitBytes / 4 tokens), else Gemini 2.5's 1,048,576.
 */
function geminiModel(url: string, limitBytes: number | undefined): unknown {
  const id = decodeURIComponent(url.split('?')[0].slice('/v1beta/models/'.length));
  return {
    name: `models/${id}`,
    version: '001',
    displayName: id,
    inputTokenLimit: limitBytes === undefined ? 1_048_576 : Math.floor(limitBytes / 4),
    outputTokenLimit: 65_536,
    supportedGenerationMethods: ['generateContent', 'countTokens', 'createCachedContent', 'batchGenerateContent'],
    temperature: 1,
    topP: 0.95,
    topK: 64,
    maxTemperature: 2,
    thinking: true,
  };
}

/** Keeps a copy of the head (status and fields) and of every body byte written to `res`. */
function record(res: ServerResponse, chunks: Buffer[], head: Record<string, unknown>, onStatus: (status: number) => void): void {
  const writeHead = res.writeHead.bind(res) as (...args: any[]) => ServerResponse;
  res.writeHead = ((status: number, ...rest: any[]) => {
    onStatus(status);
    const fields = rest.find((r) => r !== null && typeof r === 'object');
    if (fields && !Array.isArray(fields)) for (const [k, v] of Object.entries(fields)) head[k.toLowerCase()] = v;
    return writeHead(status, ...rest);
  }) as typeof res.writeHead;
  const keep = (chunk: unknown) => {
    if (chunk !== undefined && chunk !== null && typeof chunk !== 'function') chunks.push(Buffer.from(chunk as string | Uint8Array));
  };
  const write = res.write.bind(res) as (...args: any[]) => boolean;
  const end = res.end.bind(res) as (...args: any[]) => ServerResponse;
  res.write = ((chunk: unknown, ...rest: any[]) => (keep(chunk), write(chunk, ...rest))) as typeof res.write;
  res.end = ((chunk?: unknown, ...rest: any[]) => (keep(chunk), end(chunk, ...rest))) as typeof res.end;
}

async function play(res: ServerResponse, answer: Scripted): Promise<void> {
  if ('json' in answer) return json(res, answer.status, answer.json, answer.headers);
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const [k, event] of answer.events.entries()) {
    if (answer.pause && k === answer.pause.after) await answer.pause.until;
    if (res.destroyed) return;
    res.write(event);
  }
  if (answer.pause && answer.pause.after >= answer.events.length) await answer.pause.until;
  if (answer.end === 'reset') return void res.destroy();
  res.end();
}
