import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { json, startFakeUpstream, type FakeUpstream, type Handler, type Received } from './fake-upstream.js';
import { NGINX_413 } from './nginx.js';
import { seal, unseal } from './signed.js';

/*
 * A strict stand-in for the Gemini API (generativelanguage.googleapis.com, v1beta) with Gemini 3
 * thought signatures: every functionCall it answers with carries a thoughtSignature sealed over
 * the call's id and the model, and the functionCall parts of the newest model turn must come back
 * with theirs, unchanged, as the thought-signatures guide requires ("only the current turn is
 * validated": earlier turns' signatures are not checked). It answers with the API's own errors,
 * in its order: the edge, the key, the request's shape, roles, signatures, tool pairs, the window.
 *
 * The model is in the path, not the body; the server root is the base URL (http://127.0.0.1:PORT),
 * as @google/genai builds `/v1beta/models/{model}:{method}` under it.
 *
 * Choices where the API is not documented, each the stand-in's own:
 * - `position N` in the missing-signature 400 is the 1-based index of the part among all parts of
 *   `contents`, counted across turns (systemInstruction not counted). Google's messages read
 *   "position 2" for [user text, model functionCall], which this reproduces.
 * - "Thought signature is not valid." is the stand-in's wording for a signature that does not
 *   unseal, or was issued for another call id or another model.
 * - countTokens checks the key, the shape and the roles (not signatures, pairs or the window).
 * - streamGenerateContent without alt=sse answers one JSON array, and so do its errors ([{error}]),
 *   as Google's array stream does.
 */

const BYTES_PER_TOKEN = 4;
export const tokensOf = (bytes: number) => Math.ceil(bytes / BYTES_PER_TOKEN);

export type StrictGeminiReject = 'invalid_argument' | 'edge_413' | 'stream_error';

export interface StrictGeminiOptions {
  /** Bodies larger than this are over the window (limitBytes / 4 tokens). Default: no limit. */
  limitBytes?: number;
  /** How a body over limitBytes is refused. Default invalid_argument. */
  style?: StrictGeminiReject;
  /** What the model says. Default: the text 'next step'. Both: the text part, then the call. */
  reply?: (req: Received) => { text?: string; functionCall?: { id: string; name: string; args: unknown } };
}

export interface GeminiCheck {
  /** The error message it answered with (key, shape, signature, pairs, window or size), if any. */
  refused: string | null;
}

/** The credential a request carried. */
interface ApiKey {
  via: 'x-goog-api-key' | 'key';
  key: string;
}

export interface StrictGemini extends FakeUpstream {
  /** generateContent and streamGenerateContent calls, the summarizer's excepted. */
  generateCalls(): Received[];
  summarizerCalls(): Received[];
  countTokensCalls(): Received[];
  /** One per generateCalls() entry, in order. */
  checks(): GeminiCheck[];
  /** The model parts each answered generate call got; call indexes generateCalls(). */
  issued(): Array<{ call: number; parts: unknown[] }>;
  /** One per received request, in order: the key it carried, or null. */
  keys(): Array<ApiKey | null>;
}

type Method = 'generateContent' | 'streamGenerateContent' | 'countTokens';

interface Route {
  model: string;
  method: Method;
  /** streamGenerateContent with alt=sse; without it the stream is one JSON array. */
  sse: boolean;
  key: ApiKey | null;
}

/** What a thoughtSignature records of the call it was issued with. */
interface Signed {
  kind: 'gemini-thought-signature';
  id: string | null;
  model: string;
}

const KIND = 'gemini-thought-signature';
const ROUTE = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent|countTokens)$/;

export const MESSAGES = {
  unregistered:
    "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
  noContents: '* GenerateContentRequest.contents: contents is not specified\n',
  emptyParts: (i: number) => `* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.\n`,
  role: 'Please use a valid role: user, model.',
  missingSignature: (name: string, position: number) =>
    'Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. ' +
    `Additional data, function call \`default_api:${name}\` , position ${position}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.`,
  invalidSignature: 'Thought signature is not valid.',
  pairing: 'Please ensure that function response turn comes immediately after a function call turn.',
  window: (tokens: number, limit: number) => `The input token count (${tokens}) exceeds the maximum number of tokens allowed (${limit}).`,
};

const isSummarizer = (r: Received) => r.headers['x-gateway-compaction'] === 'summarizer';
const generate = (r: Received) => ['generateContent', 'streamGenerateContent'].includes(routeOf(r)?.method ?? '');
const isRecord = (v: unknown): v is Record<string, any> => v !== null && typeof v === 'object' && !Array.isArray(v);
const partsOf = (content: unknown): any[] => (isRecord(content) && Array.isArray(content.parts) ? content.parts : []);

export interface StrictGeminiRules {
  handle: Handler;
  checks(): GeminiCheck[];
  issued(): Array<{ call: number; parts: unknown[] }>;
  keys(): Array<ApiKey | null>;
}

/** The Gemini API's rules as a handler, for one server or a route of a shared one. */
export function strictGeminiRules(options: StrictGeminiOptions = {}): StrictGeminiRules {
  const checks: GeminiCheck[] = [];
  const issued: Array<{ call: number; parts: unknown[] }> = [];
  const keys: Array<ApiKey | null> = [];
  let answered = 0;
  let seen = 0;

  const handle: Handler = (req, res) => {
    const route = routeOf(req);
    const call = route && route.method !== 'countTokens' && !isSummarizer(req) ? seen++ : -1;
    keys.push(route?.key ?? keyOf(req));
    if (!route)
      return json(
        res,
        404,
        pretty(googleError(404, 'NOT_FOUND', `The requested URL ${req.url.split('?')[0]} was not found on this server.`)),
      );
    const summarizer = isSummarizer(req);
    const check: GeminiCheck = { refused: null };
    if (route.method !== 'countTokens' && !summarizer) checks.push(check);

    const admitted = admit(req, route, options);
    if (admitted instanceof Refusal) {
      check.refused = admitted.message;
      return admitted.write(res, route);
    }
    if (route.method === 'countTokens') return json(res, 200, pretty({ totalTokens: tokensOf(req.body.length) }));

    const n = ++answered;
    let parts: any[];
    if (summarizer) {
      parts = [{ text: `SUMMARY of ${textOf(admitted).length} chars: the user asked for a review of src/.` }];
    } else {
      parts = answerParts(options.reply?.(req) ?? {}, route.model);
      issued.push({ call, parts });
    }
    const chunks = chunksOf(parts, route.model, `strict-gemini-${n}-${randomBytes(6).toString('base64url')}`, req.body.length);
    if (route.method === 'generateContent') return json(res, 200, pretty(whole(chunks)));
    writeStream(res, route, chunks);
  };
  return { handle, checks: () => checks, issued: () => issued, keys: () => keys };
}

export async function startStrictGemini(options: StrictGeminiOptions = {}): Promise<StrictGemini> {
  const rules = strictGeminiRules(options);
  const upstream = await startFakeUpstream(rules.handle);
  return {
    ...upstream,
    generateCalls: () => upstream.received.filter((r) => generate(r) && !isSummarizer(r)),
    summarizerCalls: () => upstream.received.filter((r) => generate(r) && isSummarizer(r)),
    countTokensCalls: () => upstream.received.filter((r) => routeOf(r)?.method === 'countTokens'),
    checks: rules.checks,
    issued: rules.issued,
    keys: rules.keys,
  };
}

function routeOf(req: Received): Route | null {
  const url = new URL(req.url, 'http://stand-in');
  const match = ROUTE.exec(decodeURIComponent(url.pathname));
  if (req.method !== 'POST' || !match) return null;
  const method = match[2] as Method;
  return { model: match[1], method, sse: method === 'streamGenerateContent' && url.searchParams.get('alt') === 'sse', key: keyOf(req) };
}

/** The header wins over the query, as Google reads them. */
function keyOf(req: Received): ApiKey | null {
  const header = req.headers['x-goog-api-key'];
  if (typeof header === 'string' && header !== '') return { via: 'x-goog-api-key', key: header };
  const query = new URL(req.url, 'http://stand-in').searchParams.get('key');
  return query ? { via: 'key', key: query } : null;
}

/** How the stand-in says no: the message (for checks()) and the bytes. */
class Refusal {
  constructor(
    readonly message: string,
    readonly write: (res: ServerResponse, route: Route) => void,
  ) {}

  static google(code: number, status: string, message: string): Refusal {
    return new Refusal(message, (res, route) => writeError(res, route, code, googleError(code, status, message)));
  }

  static invalid(message: string): Refusal {
    return Refusal.google(400, 'INVALID_ARGUMENT', message);
  }
}

/** The API's checks, in its order: the edge, the key, shape, roles, signatures, pairs, window. */
function admit(req: Received, route: Route, options: StrictGeminiOptions): any[] | Refusal {
  const limitBytes = options.limitBytes ?? Infinity;
  const style = options.style ?? 'invalid_argument';
  const over = req.body.length > limitBytes;
  // An edge proxy answers before anything reads the body, or the key.
  if (over && style === 'edge_413') return new Refusal('413 Request Entity Too Large', edge413);
  if (!route.key) return Refusal.google(403, 'PERMISSION_DENIED', MESSAGES.unregistered);

  const body = req.json;
  const contents = route.method === 'countTokens' ? (body?.contents ?? body?.generateContentRequest?.contents) : body?.contents;
  if (!isRecord(body) || !Array.isArray(contents) || contents.length === 0) return Refusal.invalid(MESSAGES.noContents);
  const empty = contents.findIndex((c) => partsOf(c).length === 0);
  if (empty >= 0) return Refusal.invalid(MESSAGES.emptyParts(empty));
  // role is optional ("can be left blank or unset" for a single turn); any other value is refused.
  if (contents.some((c) => ![undefined, '', 'user', 'model'].includes(c.role))) return Refusal.invalid(MESSAGES.role);
  if (route.method === 'countTokens') return contents;

  const signature = signatureProblem(contents, route.model);
  if (signature) return Refusal.invalid(signature);
  if (unansweredResponse(contents)) return Refusal.invalid(MESSAGES.pairing);
  if (over) return tooLong(route, style, tokensOf(req.body.length), Math.floor(limitBytes / BYTES_PER_TOKEN));
  return contents;
}

// ---------------------------------------------------------------------------------------------
// Thought signatures and tool pairs

/**
 * Every functionCall part of the newest model turn must carry the signature issued with it.
 * The first part that fails, in order, is the 400.
 */
function signatureProblem(contents: any[], model: string): string | null {
  const latest = contents.findLastIndex((c) => c.role === 'model');
  if (latest < 0) return null;
  let position = contents.slice(0, latest).reduce((n, c) => n + partsOf(c).length, 0);
  for (const part of partsOf(contents[latest])) {
    position++;
    if (!isRecord(part?.functionCall)) continue;
    const call = part.functionCall;
    if (typeof part.thoughtSignature !== 'string' || part.thoughtSignature === '')
      return MESSAGES.missingSignature(String(call.name), position);
    const signed = unseal<Signed>(part.thoughtSignature);
    if (signed?.kind !== KIND || signed.id !== idOf(call) || signed.model !== model) return MESSAGES.invalidSignature;
  }
  return null;
}

const idOf = (v: Record<string, any>): string | null => (typeof v.id === 'string' && v.id !== '' ? v.id : null);

/**
 * Every functionResponse answers a functionCall of the model turn right before it: the call with
 * its id, or, for a call without one, the next unanswered call of the same name.
 */
function unansweredResponse(contents: any[]): boolean {
  return contents.some((content, i) => {
    const responses = partsOf(content)
      .filter((p) => isRecord(p?.functionResponse))
      .map((p) => p.functionResponse);
    if (responses.length === 0) return false;
    const before = contents[i - 1];
    const open =
      before?.role === 'model'
        ? partsOf(before)
            .filter((p) => isRecord(p?.functionCall))
            .map((p) => p.functionCall)
        : [];
    return responses.some((response) => {
      const id = idOf(response);
      let k = id === null ? -1 : open.findIndex((call) => idOf(call) === id);
      if (k < 0) k = open.findIndex((call) => idOf(call) === null && call.name === response.name);
      if (k < 0) return true;
      open.splice(k, 1);
      return false;
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Wire shapes

function googleError(code: number, status: string, message: string) {
  return { error: { code, message, status } };
}

/** Google indents its JSON by two spaces. */
const pretty = (value: unknown) => JSON.stringify(value, null, 2);

function writeError(res: ServerResponse, route: Route, code: number, error: unknown): void {
  const arrayStream = route.method === 'streamGenerateContent' && !route.sse;
  json(res, code, pretty(arrayStream ? [error] : error), { 'content-type': 'application/json; charset=UTF-8' });
}

function edge413(res: ServerResponse): void {
  res.writeHead(413, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_413) });
  res.end(NGINX_413);
}

function tooLong(route: Route, style: StrictGeminiReject, tokens: number, limit: number): Refusal {
  const message = MESSAGES.window(tokens, limit);
  if (style !== 'stream_error' || route.method !== 'streamGenerateContent') return Refusal.invalid(message);
  // The stream has already said 200: the overflow is its first and only element.
  return new Refusal(message, (res) => writeStream(res, route, [googleError(400, 'INVALID_ARGUMENT', message)]));
}

function answerParts(reply: ReturnType<NonNullable<StrictGeminiOptions['reply']>>, model: string): any[] {
  const parts: any[] = [];
  if (reply.text !== undefined || !reply.functionCall) parts.push({ text: reply.text ?? 'next step' });
  if (reply.functionCall) {
    const { id, name, args } = reply.functionCall;
    parts.push({ functionCall: { id, name, args }, thoughtSignature: seal({ kind: KIND, id, model } satisfies Signed) });
  }
  return parts;
}

/** The text of every text part sent, the summarizer's transcript among them. */
function textOf(contents: any[]): string {
  return contents.flatMap((c) => partsOf(c).map((p) => (typeof p?.text === 'string' ? p.text : ''))).join('');
}

/** The answer as Gemini streams it: one chunk per part, finishReason and usage on the last. */
function chunksOf(parts: any[], model: string, responseId: string, bytes: number): any[] {
  const prompt = tokensOf(bytes);
  const candidates = tokensOf(Buffer.byteLength(JSON.stringify(parts)));
  return parts.map((part, k) => {
    const last = k === parts.length - 1;
    return {
      candidates: [{ content: { role: 'model', parts: [part] }, ...(last ? { finishReason: 'STOP' } : {}), index: 0 }],
      ...(last
        ? { usageMetadata: { promptTokenCount: prompt, candidatesTokenCount: candidates, totalTokenCount: prompt + candidates } }
        : {}),
      modelVersion: model,
      responseId,
    };
  });
}

/** The chunks as one GenerateContentResponse: all parts in one candidate. */
function whole(chunks: any[]): unknown {
  const last = chunks.at(-1);
  const parts = chunks.flatMap((c) => c.candidates[0].content.parts);
  return { ...last, candidates: [{ ...last.candidates[0], content: { role: 'model', parts } }] };
}

/** SSE: each event a whole response, `\r\n\r\n` after it; otherwise one JSON array. One write per chunk. */
function writeStream(res: ServerResponse, route: Route, chunks: unknown[]): void {
  if (route.sse) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (const chunk of chunks) res.write(`data: ${JSON.stringify(chunk)}\r\n\r\n`);
    return void res.end();
  }
  res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
  chunks.forEach((chunk, k) => res.write(`${k === 0 ? '[' : ',\r\n'}${pretty(chunk)}`));
  res.end(']');
}
