import type { ApiEndpoint, Dialect, Entry, ErrorFacts, Rendered, Slot, ToolOutput } from './types.js';
import { isRecord, lastCount, positiveInt, str, type Json, usageOf, wireBytes, withField } from './parts.js';

/*
 * Gemini (Gemini CLI): `contents` of `user`/`model` turns made of `parts`; everything else goes back as sent, and the model is in the
 * path. `functionResponse` parts answer the previous turn's `functionCall`s by `id` (by name where a client sends none).
 *
 * A `thoughtSignature` is the model's opaque state: a model turn is only kept or condensed whole, so kept signatures are byte-exact,
 * and the newest model turn (whose call signatures the API checks) is always kept. write() merges neighbouring user turns only.
 */

const MEDIA = new Set(['inlineData', 'fileData']);

function partsOf(content: unknown): Json[] {
  return isRecord(content) && Array.isArray(content.parts) ? content.parts.filter(isRecord) : [];
}

/** A call's id, or its name where the client sends no id (pairs then follow the order). */
function callKey(call: unknown): string {
  const c = isRecord(call) ? call : {};
  return String(c.id ?? c.name ?? '');
}

function describe(item: unknown): Entry {
  const parts = partsOf(item);
  if (isRecord(item) && item.role === 'model') {
    return {
      role: 'assistant',
      calls: parts.filter((p) => isRecord(p.functionCall)).map((p) => callKey(p.functionCall)),
      answers: [],
      joinsNext: false,
    };
  }
  const answers = parts.filter((p) => isRecord(p.functionResponse)).map((p) => callKey(p.functionResponse));
  return { role: answers.length > 0 ? 'tool' : 'user', calls: [], answers, joinsNext: false };
}

function responseText(response: unknown): string {
  if (isRecord(response) && typeof response.output === 'string') return response.output;
  return JSON.stringify(response ?? {});
}

function render(item: unknown): Rendered {
  const parts = partsOf(item);
  const answers = describe(item).answers;
  const who = answers.length > 0 ? `tool result ${answers.join(', ')}` : isRecord(item) && item.role === 'model' ? 'assistant' : 'user';
  // Thought parts are the model's own reasoning: not read, kept or dropped with their turn.
  const text = parts
    .map((p) => {
      if (p.thought === true) return '';
      if (typeof p.text === 'string') return p.text;
      if (isRecord(p.functionResponse)) return responseText(p.functionResponse.response);
      const media = Object.keys(p).find((k) => MEDIA.has(k));
      return media ? `[${media}]` : '';
    })
    .filter(Boolean)
    .join('\n');
  const calls = parts
    .filter((p) => isRecord(p.functionCall))
    .map((p) => {
      const call = p.functionCall as Json;
      return { id: callKey(call), name: str(call.name) ?? 'tool', args: JSON.stringify(call.args ?? {}) };
    });
  return { who, text, calls };
}

/** A user turn's function responses, each as `{output: line}`; its other parts as sent. */
function mask(item: unknown, label: (output: ToolOutput) => string): unknown | null {
  if (!isRecord(item) || item.role === 'model' || !partsOf(item).some((p) => isRecord(p.functionResponse))) return null;
  const parts = (item.parts as unknown[]).map((p) => {
    if (!isRecord(p) || !isRecord(p.functionResponse)) return p;
    const call = p.functionResponse;
    const output = label({ id: callKey(call), text: responseText(call.response), bytes: wireBytes(call.response ?? {}) });
    return { ...p, functionResponse: { ...call, response: { output } } };
  });
  return { ...item, parts };
}

/** A user turn's text, tool outputs and inline media may be shortened; a model turn never. */
function slots(item: unknown): Slot[] {
  if (!isRecord(item) || item.role === 'model') return [];
  const out: Slot[] = [];
  partsOf(item).forEach((part, p) => {
    if (typeof part.text === 'string' && part.thought !== true) out.push({ kind: 'text', path: ['parts', p, 'text'], text: part.text });
    const response = isRecord(part.functionResponse) ? part.functionResponse.response : undefined;
    if (isRecord(response) && typeof response.output === 'string') {
      out.push({ kind: 'text', path: ['parts', p, 'functionResponse', 'response', 'output'], text: response.output });
    }
    if (isRecord(part.inlineData)) out.push({ kind: 'image', path: ['parts', p], value: part, placeholder: (text) => ({ text }) });
  });
  return out;
}

/** Adjacent user turns as one, their function responses first: the API wants turns to alternate. */
function wireContents(items: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  for (const item of items) {
    const last = out.at(-1);
    if (isRecord(item) && item.role === 'user' && isRecord(last) && last.role === 'user') {
      const parts = [...partsOf(last), ...partsOf(item)];
      const isResponse = (p: Json) => isRecord(p.functionResponse);
      out[out.length - 1] = { ...last, parts: [...parts.filter(isResponse), ...parts.filter((p) => !isResponse(p))] };
    } else {
      out.push(item);
    }
  }
  return out;
}

/** What the API would refuse once written: a function response not right after its call's turn. */
function problems(items: unknown[]): string[] {
  const contents = wireContents(items);
  const found: string[] = [];
  contents.forEach((content, i) => {
    const previous = contents[i - 1];
    const issued = new Set(isRecord(previous) && previous.role === 'model' ? describe(previous).calls : []);
    for (const key of describe(content).answers) {
      if (!issued.has(key)) found.push(`the functionResponse for ${JSON.stringify(key)} is not right after its functionCall`);
    }
  });
  return found;
}

function generationConfig(request: Json): Json {
  return isRecord(request.generationConfig) ? request.generationConfig : {};
}

/** The route's model parameter: a path segment up to the first colon. */
const MODEL = ':model(^[^:]+)';

function endpoint(action: string): ApiEndpoint {
  return {
    path: `/v1beta/models/${MODEL}::${action}`,
    label: `/v1beta/models/{model}:${action}`,
    upstreamPath: (params) => `/v1beta/models/${encodeURIComponent(params.model)}:${action}`,
    model: (params) => params.model,
  };
}

/** The model a pass-through path names: `/v1beta/models/{model}:countTokens`, `/v1beta/models/{model}`. */
function pathModel(path: string): string | undefined {
  const match = /^\/v1beta\/models\/([^/:]+)/.exec(path);
  return match ? decodeURIComponent(match[1]) : undefined;
}

/** `{error: {code, message, status, details}}` with a google.rpc status name, and the gateway's code as an ErrorInfo reason. */
function googleErrorBody(e: ErrorFacts): unknown {
  const status = GOOGLE_STATUSES[e.status] ?? (e.status >= 500 ? 'INTERNAL' : 'INVALID_ARGUMENT');
  return {
    error: {
      code: e.status,
      message: e.message,
      status,
      details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: e.code.toUpperCase(), domain: 'compaction-gateway' }],
    },
  };
}

const GOOGLE_STATUSES: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  408: 'DEADLINE_EXCEEDED',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  502: 'UNAVAILABLE',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

/** The model is in the path at the base URL's root (`/v1beta/models/{model}:streamGenerateContent?alt=sse`: events are whole answers). */
export const gemini: Dialect = {
  api: 'gemini',
  title: 'Gemini',
  prefix: '/v1beta',
  upstreamBaseHoldsPrefix: false,
  clientBaseUrl: { name: 'gemini', withPrefix: false },
  missingPrefix: null,
  paths: /^\/v1beta\//,
  endpoints: [endpoint('generateContent'), endpoint('streamGenerateContent')],
  credential: 'x-goog-api-key',
  pathModel,
  errorBody: googleErrorBody,
  telemetry: { operation: 'generate_content', provider: 'gcp.gemini' },
  agentCompactions: [],
  modelWindow: {
    path: (model) => `/models/${encodeURIComponent(model)}`,
    tokens: (card) => card.inputTokenLimit,
    from: 'gemini models.get',
  },
  read(request) {
    const list = request.contents;
    if (!Array.isArray(list) || list.length === 0 || !list.every((c) => isRecord(c) && Array.isArray(c.parts))) return null;
    return { items: list, entries: list.map(describe) };
  },
  write: (request, items) => withField(request, 'contents', wireContents(items)),
  wireCount: (items) => wireContents(items).length,
  describe,
  render,
  slots,
  mask,
  // The API has no system turn among contents: a summary is the user's.
  summaryItem: (text) => ({ role: 'user', parts: [{ text }] }),
  completion: (request) => positiveInt(generationConfig(request).maxOutputTokens),
  withCompletion: (request, tokens) => withField(request, 'generationConfig', { ...generationConfig(request), maxOutputTokens: tokens }),
  problems,
  // A stream's events are whole answers, an error among them: the first one decides.
  streamEvent: null,
  serverSideRescue: () => null,
  bound: null,
  droppedState: null,
  promptCount: (answer) => lastCount(answer, 'promptTokenCount'),
  overflow: {
    says: (body) => body.includes('exceeds the maximum number of tokens allowed'),
    error: (prompt, limit) => ({
      error: {
        code: 400,
        message: `The input token count (${prompt}) exceeds the maximum number of tokens allowed (${limit}).`,
        status: 'INVALID_ARGUMENT',
      },
    }),
  },
  summarizer: {
    credential: 'x-goog-api-key',
    path: (model) => `/v1beta/models/${encodeURIComponent(model)}:generateContent`,
    body: ({ instructions, transcript, maxTokens }) => ({
      systemInstruction: { parts: [{ text: instructions }] },
      contents: [{ role: 'user', parts: [{ text: transcript }] }],
      generationConfig: { maxOutputTokens: maxTokens },
    }),
    text(answer) {
      const candidates = isRecord(answer) && Array.isArray(answer.candidates) ? answer.candidates : [];
      const text = partsOf(isRecord(candidates[0]) ? candidates[0].content : undefined)
        .filter((p) => typeof p.text === 'string' && p.thought !== true)
        .map((p) => p.text as string)
        .join('');
      return text || undefined;
    },
    usage: (answer) => usageOf(answer, 'usageMetadata', 'promptTokenCount', 'candidatesTokenCount'),
    headers: () => ({}),
  },
};
