import { randomInt } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { startFakeUpstream, type FakeUpstream, type Received } from './fake-upstream.js';
import type { Reply } from './provider.js';

/*
 * A strict stand-in for a local Ollama server (v0.33, github:ollama/ollama as of August 2026),
 * read from its source, not copied:
 *
 *   server/routes.go        GenerateRoutes (the routes, `r.HandleMethodNotAllowed = true`: a wrong
 *                           method gets gin's 405 "405 method not allowed", text/plain, with an
 *                           Allow header, since ollama/ollama#10275; an unknown path gin's 404
 *                           "404 page not found"), ShowHandler / GetModelInfo (`model 'x:latest'
 *                           not found`, the `parameters` text as `%-30s %#v` lines from the
 *                           Modelfile's options, model_info the GGUF keys with
 *                           `<arch>.context_length` the TRAINED length), PsHandler (a model is
 *                           listed once the scheduler loaded it for a request; `context_length`
 *                           is the runner's ContextLength()), ChatHandler (Modelfile num_ctx over
 *                           OLLAMA_CONTEXT_LENGTH, request `options` over both; the empty-messages
 *                           "load" answer; `model 'x' not found`), writeChatResponse, streamResponse
 *                           (NDJSON by default, one JSON for `stream:false`).
 *   server/prompt.go        chatPrompt: whole messages dropped oldest first until the rendered
 *                           prompt fits num_ctx (`ctxLen <= opts.NumCtx`), the system messages of the
 *                           dropped part kept (moved first), the last message always kept; 768
 *                           tokens an image when the model has a projector.
 *   server/sched.go         the runner reloads when num_ctx changes; llm/server.go caps num_ctx at
 *                           the trained context ("requested context size too large for model").
 *   llm/llama_server.go     completionPromptForRequest: a prompt of more than num_ctx - 1 tokens is
 *                           cut to its first num_keep tokens and its newest ones,
 *                           `limit = num_ctx - max((num_ctx - num_keep) / 2, 1)` (since v0.30.11,
 *                           ollama/ollama#16856; the "half of num_ctx" of ollama/ollama#17427), logged
 *                           WARN "truncating input prompt" limit= prompt= keep= new=; with
 *                           `shift:false` it refuses instead. prompt_eval_count = cache_n + prompt_n
 *                           of llama-server: every token kept.
 *   api/types.go            DefaultOptions (num_keep 4), ChatResponse, Metrics, ProcessModelResponse
 *                           (name, model, size, digest, details, expires_at, size_vram,
 *                           context_length), ShowResponse, ListModelResponse.
 *   openai/openai.go,       the /v1 layer: FromChatRequest (no `options` field, so a body's
 *   middleware/openai.go    options.num_ctx is ignored; each part of an array content becomes a
 *                           message of its own), ToChatCompletion (system_fingerprint "fp_ollama",
 *                           usage from prompt_eval_count/eval_count), ChatWriter (the first chunk
 *                           carries the role with the content, then a finish chunk with an empty
 *                           delta, the usage chunk only with stream_options.include_usage, then
 *                           [DONE]), ToListCompletion (/v1/models: id, object, created, owned_by =
 *                           the name's namespace: no context length), NewError.
 *
 * Two chat modes, as routes.go chooses them: 'rendered' (the default for library models, whose Go
 * TEMPLATE Ollama renders itself) cuts an overlong prompt and always answers 200; 'native' (the
 * model's GGUF template run by llama-server) drops whole messages the same way but passes
 * llama-server's 400 for a prompt still over num_ctx through as its error text.
 *
 * Token counting is a deterministic stand-in for a tokenizer, exported so tests can recompute it:
 * a fixed template overhead a message plus ceil(UTF-8 bytes of its content and tool_calls / 4), the
 * tools' JSON counted once. It counts the rendered conversation, never the request's bytes.
 *
 * It does not import src/: a stand-in must not depend on the code it judges.
 */

// ---------------------------------------------------------------------------------------------
// The token count, shared with the llama.cpp stand-in

/** The chat template's tokens around one message (role markers, separators). */
const TEMPLATE_TOKENS_PER_MESSAGE = 4;
export const BYTES_PER_TOKEN = 4;

/** The text of a message content: a string, or an array's text parts joined by "\n" (llama.cpp's concat). */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (Array.isArray(content))
    return content
      .filter((p: any) => p?.type === 'text')
      .map((p: any) => String(p.text ?? ''))
      .join('\n');
  return JSON.stringify(content);
}

/** One message's tokens: the template overhead + ceil(UTF-8 bytes of its content and its tool_calls JSON / 4). */
export function messageTokens(message: any): number {
  const calls = Array.isArray(message?.tool_calls) && message.tool_calls.length > 0 ? JSON.stringify(message.tool_calls) : '';
  return TEMPLATE_TOKENS_PER_MESSAGE + Math.ceil(Buffer.byteLength(textOf(message?.content) + calls) / BYTES_PER_TOKEN);
}

/** The tools' tokens, counted once for the whole prompt. */
export function toolsTokens(tools: unknown): number {
  return Array.isArray(tools) && tools.length > 0 ? Math.ceil(Buffer.byteLength(JSON.stringify(tools)) / BYTES_PER_TOKEN) : 0;
}

/** The rendered prompt's tokens: the tools once, then every message. */
export function promptTokensOf(messages: any[], tools?: unknown): number {
  return toolsTokens(tools) + messages.reduce((sum, m) => sum + messageTokens(m), 0);
}

// ---------------------------------------------------------------------------------------------
// llama-server's refusal, which Ollama's native mode passes through (and the llama.cpp stand-in sends)

/** The message of llama-server's refusal of a prompt of `nPrompt` tokens in a slot of `nCtx` (tools/server/server-context.cpp). */
export const llamaExceedMessage = (nPrompt: number, nCtx: number) =>
  `request (${nPrompt} tokens) exceeds the available context size (${nCtx} tokens), try increasing it`;

/** llama-server's 400 body for it, key order as nlohmann::ordered_json writes it (format_error_response + n_prompt_tokens, n_ctx). */
export function llamaExceedBody(nPrompt: number, nCtx: number): string {
  return JSON.stringify({
    error: {
      code: 400,
      message: llamaExceedMessage(nPrompt, nCtx),
      type: 'exceed_context_size_error',
      n_prompt_tokens: nPrompt,
      n_ctx: nCtx,
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Ollama's truncation, as a pure function

/** api/types.go DefaultOptions: "set a minimal num_keep to avoid issues on context shifts". */
const OLLAMA_DEFAULT_NUM_KEEP = 4;
/** server/prompt.go: "Clip images are represented as 768 tokens, each an embedding." */
const OLLAMA_IMAGE_TOKENS = 768;
const OLLAMA_VERSION = '0.33.0';
/** llm/llama_server.go: shorten the prompt, or the context, when context shift is off. */
const OLLAMA_NO_SHIFT_ERROR =
  'the prompt is longer than the context length currently available to the model; shorten the prompt, adjust the context length in settings, or use a model with a longer context length';

/** llm/llama_server.go contextShiftPromptLimit: keep num_keep, free about half of the rest. */
function contextShiftPromptLimit(numCtx: number, numKeep: number): number {
  if (numCtx <= 1) return 0;
  const keep = Math.max(0, Math.min(numKeep, numCtx - 1));
  return numCtx - Math.max(Math.trunc((numCtx - keep) / 2), 1);
}

interface OllamaPlanOptions {
  numCtx: number;
  numKeep?: number;
  /** The tokenizer adds a BOS token (tokenizer.ggml.add_bos_token); qwen3's does not. */
  addsBos?: boolean;
  /** The model has a projector: each image counts 768 tokens when whole messages are dropped. */
  vision?: boolean;
  /** `truncate` of /api/chat (default true): false drops nothing and cuts nothing. */
  truncate?: boolean;
  mode?: 'rendered' | 'native';
}

interface TokenCut {
  limit: number;
  prompt: number;
  keep: number;
  new: number;
}

interface OllamaPromptPlan {
  /** The whole conversation's tokens, nothing dropped. */
  promptTokens: number;
  /** After whole messages were dropped, before any token cut (llama-server counts this one). */
  renderedTokens: number;
  /** What the model evaluated: prompt_eval_count, usage.prompt_tokens. */
  keptTokens: number;
  /** The messages rendered: the dropped part's system messages first, then the newest messages. */
  keptMessages: any[];
  /** Indexes (in the request's messages, as Ollama split them) of the messages dropped whole. */
  droppedIndexes: number[];
  /** The token-level cut, when there was one (rendered mode). */
  cut: TokenCut | null;
  truncated: boolean;
  /** The first user message (the task) reached the model whole. */
  taskKept: boolean;
}

const imagesOf = (m: any) => (Array.isArray(m?.images) ? m.images.length : 0);

/** What Ollama renders and evaluates of `messages` (Ollama's own messages: string contents, images). */
function ollamaPromptPlan(messages: any[], tools: unknown, options: OllamaPlanOptions): OllamaPromptPlan {
  const { numCtx } = options;
  const numKeep = options.numKeep ?? OLLAMA_DEFAULT_NUM_KEEP;
  const bos = options.addsBos ? 1 : 0;
  const last = messages.length - 1;
  const text = (ms: any[]) => promptTokensOf(ms, tools);
  const systemBefore = (i: number) => messages.slice(0, i).filter((m) => m?.role === 'system');
  let start = 0;
  if (options.truncate !== false) {
    // chatPrompt: start with every message and remove from the front until it fits.
    for (let i = 0; i <= last; i++) {
      const images = (options.mode === 'native' ? [...systemBefore(i), ...messages.slice(i)] : messages.slice(i)).reduce(
        (s, m) => s + imagesOf(m),
        0,
      );
      const ctxLen = text([...systemBefore(i), ...messages.slice(i)]) + (options.vision ? OLLAMA_IMAGE_TOKENS * images : 0);
      if (ctxLen <= numCtx) {
        start = i;
        break;
      }
      if (i === last) {
        start = last;
        break;
      }
    }
  }
  const keptIndexes = [...messages.keys()].filter((i) => i >= start || messages[i]?.role === 'system');
  // The dropped part's system messages are rendered first, then everything from `start` on.
  const order = keptIndexes.filter((i) => i < start).concat(keptIndexes.filter((i) => i >= start));
  const keptMessages = order.map((i) => messages[i]);
  const droppedIndexes = [...messages.keys()].filter((i) => !keptIndexes.includes(i));
  const renderedTokens = text(keptMessages);
  const task = messages.findIndex((m) => m?.role === 'user');
  let taskKept = task < 0 || keptIndexes.includes(task);
  let cut: TokenCut | null = null;
  let keptTokens = renderedTokens + bos;
  const hasMedia = keptMessages.some((m) => imagesOf(m) > 0);
  if (options.mode !== 'native' && options.truncate !== false && !hasMedia && numCtx > 1 && renderedTokens + bos > numCtx - 1) {
    // completionPromptForRequest: keep the first num_keep tokens and the newest ones.
    const tokens = renderedTokens + bos;
    const fullPromptLimit = numCtx - 1;
    const keep = Math.min((numKeep < 0 ? tokens : numKeep) + bos, fullPromptLimit);
    const limit = contextShiftPromptLimit(numCtx, keep);
    const discard = tokens - limit;
    // tokens[:keep] + tokens[keep + discard:]: `limit` tokens in all.
    cut = { limit, prompt: tokens, keep, new: tokens - discard };
    keptTokens = cut.new;
    if (taskKept && task >= 0) {
      // Where the task sits in the rendered prompt: BOS, the tools, then the messages in order.
      let at = bos + toolsTokens(tools);
      for (const i of order) {
        const span = messageTokens(messages[i]);
        if (i === task && at + span > keep && at < keep + discard) taskKept = false;
        at += span;
      }
    }
  }
  return {
    promptTokens: text(messages),
    renderedTokens,
    keptTokens,
    keptMessages,
    droppedIndexes,
    cut,
    truncated: droppedIndexes.length > 0 || cut !== null,
    taskKept,
  };
}

// ---------------------------------------------------------------------------------------------
// The stand-in

export interface OllamaSeen {
  /** The messages the model saw (after whole messages were dropped). */
  messages: any[];
  truncated: boolean;
  taskKept: boolean;
}

export interface OllamaOptions {
  /** Local model names (`qwen3` is `qwen3:latest`). Default ['qwen3:8b']. */
  models?: string[];
  /** The server's context: OLLAMA_CONTEXT_LENGTH, or the VRAM-tier default (4096 / 32768 / 262144). */
  numCtx: number;
  /** A Modelfile `PARAMETER num_ctx`: listed by /api/show, and it wins over numCtx. */
  modelfileNumCtx?: number;
  /** The GGUF's `<arch>.context_length` (qwen3:8b: 40960); num_ctx is capped at it. */
  trainedContext?: number;
  /** The runner's num_keep (a Modelfile or /api/chat option may change it). Default 4. */
  numKeep?: number;
  /** GGUF architecture / family. Default 'qwen3'. */
  family?: string;
  /** The tokenizer adds BOS (qwen3's does not). */
  addsBos?: boolean;
  /** The model has a vision projector. */
  vision?: boolean;
  /** How the model's chat is run (see above). Default 'rendered'. */
  chatMode?: 'rendered' | 'native';
  /** What /api/version says. */
  version?: string;
  /** What the model says to the n-th (1-based) answered chat call. Default: see defaultOllamaReply. */
  reply?: (n: number, req: Received, seen: OllamaSeen) => Reply;
  /** Time between two chunks of a /v1 stream, as generating each takes. Default 0: written at once. */
  tokenDelayMs?: number;
}

/** A model that lost its first user message has no instructions left: it answers plain text, no call. */
export const LOST_TASK_ANSWER = "I don't have a task to work on.";
function defaultOllamaReply(_n: number, _req: Received, seen: OllamaSeen): Reply {
  return { text: seen.taskKept ? 'ok' : LOST_TASK_ANSWER };
}

export interface OllamaChatCall extends Omit<OllamaPromptPlan, 'keptMessages'> {
  received: Received;
  api: 'openai' | 'native';
  model: string;
  /** The num_ctx the runner ran this call with. */
  numCtx: number;
  /** Messages dropped whole. */
  droppedMessages: number;
  status: number;
  /** The error text, when refused (native mode, shift:false, truncate:false). */
  error?: string;
  answer?: Reply;
}

export interface OllamaStandIn extends FakeUpstream {
  /** Every call that reached a model, in order. */
  chatCalls(): OllamaChatCall[];
  /** The WARN lines of token-level cuts, as the server logs them. */
  truncations(): string[];
  /** Every request to /api/* (chat and generate excepted) and /v1/models. */
  discoveryCalls(): Received[];
  /** An operator restarting Ollama with another OLLAMA_CONTEXT_LENGTH: models unload. */
  setNumCtx(n: number): void;
  /** Names of the loaded models. */
  loaded(): string[];
}

/** What a qwen3:8b pull carries, for /api/tags, /api/ps and /api/show. Sizes and digests are a real pull's. */
const MODEL_SIZE = 5_225_388_164;
const RUNNING_SIZE = 6_257_919_488;
const MODIFIED_AT = '2026-07-14T09:21:43.512447213Z';

/** Go's json.Marshal escapes <, > and & (and U+2028/9) in strings. */
function goJson(value: unknown): string {
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** gin's c.JSON. */
function ginJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = goJson(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** The /v1 writers: json.NewEncoder(...).Encode, a newline after the JSON. */
function encoderJson(res: ServerResponse, status: number, body: unknown): void {
  const text = `${goJson(body)}\n`;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function ginText(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** openai.NewError: the type by status, param and code null. */
function ollamaOpenAIError(status: number, message: string) {
  const type = status === 400 ? 'invalid_request_error' : status === 404 ? 'not_found_error' : 'api_error';
  return { error: { message, type, param: null, code: null } };
}

/** gin's trees, in registration order (HEAD, GET, POST, DELETE), from GenerateRoutes. */
const ROUTES: Array<[RegExp, string[]]> = [
  [/^\/$/, ['HEAD', 'GET']],
  [/^\/api\/version$/, ['HEAD', 'GET']],
  [/^\/api\/status$/, ['GET']],
  [/^\/api\/(pull|push|show|me|signout|create|copy|generate|chat|embed|embeddings)$/, ['POST']],
  [/^\/api\/tags$/, ['HEAD', 'GET']],
  [/^\/api\/delete$/, ['DELETE']],
  [/^\/api\/user\/keys\/[^/]+$/, ['DELETE']],
  [/^\/api\/blobs\/[^/]+$/, ['HEAD', 'POST']],
  [/^\/api\/experimental\/(web_search|web_fetch)$/, ['POST']],
  [/^\/api\/experimental\/model-recommendations$/, ['GET']],
  [/^\/api\/ps$/, ['GET']],
  [/^\/v1\/(chat\/completions|completions|embeddings|responses|audio\/transcriptions|messages)$/, ['POST']],
  [/^\/v1\/models(\/[^/]+)?$/, ['GET']],
];
const TREE_ORDER = ['HEAD', 'GET', 'POST', 'DELETE'];

/** A name as Ollama resolves it: host and `library/` namespace implied, `:latest` when untagged, case-insensitive. */
function ollamaName(name: string): string {
  let n = name.trim();
  n = n.replace(/^registry\.ollama\.ai\//i, '').replace(/^library\//i, '');
  if (!/:[^/]+$/.test(n)) n = `${n}:latest`;
  return n;
}

const nowIso = () => new Date().toISOString();

/** Go's %T of a decoded JSON value. */
const goTypeOf = (v: unknown) =>
  v === null || v === undefined ? '<nil>' : typeof v === 'number' ? 'float64' : typeof v === 'boolean' ? 'bool' : 'map[string]interface {}';

interface LoadedModel {
  numCtx: number;
  expiresAt: string;
}

export async function startOllama(options: OllamaOptions): Promise<OllamaStandIn> {
  const models = (options.models ?? ['qwen3:8b']).map(ollamaName);
  const family = options.family ?? 'qwen3';
  const trained = options.trainedContext ?? 40_960;
  const version = options.version ?? OLLAMA_VERSION;
  let serverNumCtx = options.numCtx;
  const calls: OllamaChatCall[] = [];
  const truncations: string[] = [];
  const discovery: Received[] = [];
  const loaded = new Map<string, LoadedModel>();
  let answered = 0;

  const find = (name: unknown): string | undefined => {
    if (typeof name !== 'string' || name === '') return undefined;
    const wanted = ollamaName(name).toLowerCase();
    return models.find((m) => m.toLowerCase() === wanted);
  };
  const digestOf = (name: string) => {
    const seed = [...name].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7);
    return `500a1f067a9f782620b40bee6f7b0c89e17ae61f686b92c24933e4ca${seed.toString(16).padStart(8, '0')}`.slice(0, 64);
  };
  const details = () => ({
    parent_model: '',
    format: 'gguf',
    family,
    families: [family],
    parameter_size: '8.2B',
    quantization_level: 'Q4_K_M',
  });

  /** ChatHandler's options: DefaultOptions, then the Modelfile's, then the request's; capped at the trained length. */
  const runnerCtx = (requestOptions: any): number => {
    const requested = Number.isInteger(requestOptions?.num_ctx) ? requestOptions.num_ctx : (options.modelfileNumCtx ?? serverNumCtx);
    return Math.min(Math.max(requested, 4), trained);
  };
  const load = (name: string, numCtx: number) => loaded.set(name, { numCtx, expiresAt: new Date(Date.now() + 5 * 60_000).toISOString() });

  const parameters = (): string => {
    const line = (k: string, v: string) => `${k.padEnd(30)} ${v}`;
    const lines = [
      line('repeat_penalty', '1'),
      line('stop', '"<|im_start|>"'),
      line('stop', '"<|im_end|>"'),
      line('temperature', '0.6'),
      line('top_k', '20'),
      line('top_p', '0.95'),
    ];
    if (options.modelfileNumCtx !== undefined) lines.unshift(line('num_ctx', String(options.modelfileNumCtx)));
    if (options.numKeep !== undefined) lines.unshift(line('num_keep', String(options.numKeep)));
    return lines.join('\n');
  };
  const modelfile = (name: string): string => {
    const params = parameters()
      .split('\n')
      .map((l) => `PARAMETER ${l.replace(/ +/, ' ')}`)
      .join('\n');
    return `# Modelfile generated by "ollama show"\n# To build a new Modelfile based on this, replace FROM with:\n# FROM ${name}\n\nFROM /root/.ollama/models/blobs/sha256-a3de86cd1c132c822487ededd47a324c50491393e6565cd14bafa40d0b8e686f\nTEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n"""\n${params}\nLICENSE """Apache License 2.0"""\n`;
  };
  const modelInfo = () => ({
    'general.architecture': family,
    'general.basename': 'Qwen3',
    'general.file_type': 15,
    'general.parameter_count': 8_190_735_360,
    'general.quantization_version': 2,
    'general.size_label': '8B',
    'general.type': 'model',
    [`${family}.attention.head_count`]: 32,
    [`${family}.attention.head_count_kv`]: 8,
    [`${family}.attention.key_length`]: 128,
    [`${family}.attention.layer_norm_rms_epsilon`]: 0.000001,
    [`${family}.attention.value_length`]: 128,
    [`${family}.block_count`]: 36,
    [`${family}.context_length`]: trained,
    [`${family}.embedding_length`]: 4096,
    [`${family}.feed_forward_length`]: 12288,
    [`${family}.rope.freq_base`]: 1_000_000,
    'tokenizer.ggml.add_bos_token': options.addsBos ?? false,
    'tokenizer.ggml.bos_token_id': 151643,
    'tokenizer.ggml.eos_token_id': 151645,
    'tokenizer.ggml.merges': [],
    'tokenizer.ggml.model': 'gpt2',
    'tokenizer.ggml.padding_token_id': 151643,
    'tokenizer.ggml.pre': 'qwen2',
    'tokenizer.ggml.token_type': [],
    'tokenizer.ggml.tokens': [],
  });
  const sortKeys = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

  const upstream = await startFakeUpstream(async (req, res) => {
    const path = req.url.split('?')[0];
    const route = ROUTES.find(([re]) => re.test(path));
    const isChat = path === '/api/chat' || path === '/api/generate' || path === '/v1/chat/completions';
    if (!isChat && (path.startsWith('/api/') || path.startsWith('/v1/models'))) discovery.push(req);
    if (!route) return ginText(res, 404, '404 page not found');
    if (!route[1].includes(req.method)) {
      const allow = TREE_ORDER.filter((m) => m !== req.method && route[1].includes(m));
      return ginText(res, 405, '405 method not allowed', { allow: allow.join(', ') });
    }
    if (path === '/') return ginText(res, 200, 'Ollama is running');
    if (path === '/api/version') return ginJson(res, 200, { version });
    if (path === '/api/tags') {
      return ginJson(res, 200, {
        models: models.map((name) => ({
          name,
          model: name,
          modified_at: MODIFIED_AT,
          size: MODEL_SIZE,
          digest: digestOf(name),
          // model_list_cache.go: the GGUF's context_length, the trained one, not the window.
          details: { ...details(), context_length: trained, embedding_length: 4096 },
          capabilities: ['completion', 'tools', 'thinking'],
        })),
      });
    }
    if (path === '/api/ps') {
      const list = [...loaded.entries()]
        .map(([name, m]) => ({
          name,
          model: name,
          size: RUNNING_SIZE,
          digest: digestOf(name),
          details: details(),
          expires_at: m.expiresAt,
          size_vram: RUNNING_SIZE,
          context_length: m.numCtx,
        }))
        .sort((a, b) => Date.parse(b.expires_at) - Date.parse(a.expires_at));
      return ginJson(res, 200, { models: list });
    }
    if (path === '/api/show') {
      if (req.body.length === 0) return ginJson(res, 400, { error: 'missing request body' });
      if (req.json === undefined || req.json === null || typeof req.json !== 'object')
        return ginJson(res, 400, { error: 'invalid character in request body' });
      const asked = req.json.model || req.json.name;
      if (!asked) return ginJson(res, 400, { error: 'model is required' });
      const name = find(asked);
      if (!name) return ginJson(res, 404, { error: `model '${ollamaName(asked)}' not found` });
      return ginJson(res, 200, {
        license: 'Apache License 2.0',
        modelfile: modelfile(name),
        parameters: parameters(),
        template: '{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n',
        details: details(),
        model_info: sortKeys(modelInfo()),
        tensors: [
          { name: 'output.weight', type: 'Q6_K', shape: [4096, 151936] },
          { name: 'output_norm.weight', type: 'F32', shape: [4096] },
        ],
        capabilities: ['completion', 'tools', 'thinking'],
        modified_at: MODIFIED_AT,
      });
    }
    if (path === '/v1/models') {
      const data = models.map((id) => ({
        id,
        object: 'model',
        created: Math.floor(Date.parse(MODIFIED_AT) / 1000),
        owned_by: id.includes('/') ? id.split('/')[0] : 'library',
      }));
      return encoderJson(res, 200, { object: 'list', data });
    }
    if (path.startsWith('/v1/models/')) {
      const asked = decodeURIComponent(path.slice('/v1/models/'.length));
      const name = find(asked);
      if (!name) return encoderJson(res, 404, ollamaOpenAIError(404, `model '${ollamaName(asked)}' not found`));
      return encoderJson(res, 200, {
        id: asked,
        object: 'model',
        created: Math.floor(Date.parse(MODIFIED_AT) / 1000),
        owned_by: 'library',
      });
    }
    if (path === '/api/chat') return nativeChat(req, res);
    if (path === '/v1/chat/completions') return openaiChat(req, res);
    return ginJson(res, 501, { error: `stand-in: ${req.method} ${path} is a real Ollama route this stand-in does not serve` });
  });

  interface Prepared {
    name: string;
    messages: any[];
    tools: unknown;
    numCtx: number;
    numKeep: number;
    truncate: boolean;
    shift: boolean;
  }

  /** Runs a call through truncation and the model; a refusal returns its status and text. */
  function run(req: Received, api: 'openai' | 'native', p: Prepared): { call: OllamaChatCall; refusal?: { status: number; text: string } } {
    load(p.name, p.numCtx);
    const mode = options.chatMode ?? 'rendered';
    const plan = ollamaPromptPlan(p.messages, p.tools, {
      numCtx: p.numCtx,
      numKeep: p.numKeep,
      addsBos: options.addsBos,
      vision: options.vision,
      truncate: p.truncate,
      mode,
    });
    const { keptMessages, ...rest } = plan;
    const call: OllamaChatCall = {
      ...rest,
      received: req,
      api,
      model: p.name,
      numCtx: p.numCtx,
      droppedMessages: plan.droppedIndexes.length,
      status: 200,
    };
    calls.push(call);
    const overSlot = plan.renderedTokens + (options.addsBos ? 1 : 0) >= p.numCtx;
    if (mode === 'rendered' && p.truncate && !p.shift && plan.cut) {
      // ContextShift off: completionPromptForRequest refuses instead of cutting.
      Object.assign(call, {
        status: 400,
        error: OLLAMA_NO_SHIFT_ERROR,
        cut: null,
        keptTokens: 0,
        truncated: plan.droppedIndexes.length > 0,
      });
      return { call, refusal: { status: 400, text: OLLAMA_NO_SHIFT_ERROR } };
    }
    if ((mode === 'native' || !p.truncate) && overSlot) {
      // llama-server refuses; Ollama passes its body through as the error text (statusErrorMessage).
      const tokens = plan.renderedTokens + (options.addsBos ? 1 : 0);
      const text = llamaExceedBody(tokens, p.numCtx);
      Object.assign(call, { status: 400, error: text, keptTokens: 0 });
      return { call, refusal: { status: 400, text } };
    }
    if (plan.cut)
      truncations.push(
        `level=WARN source=llama_server.go:317 msg="truncating input prompt" limit=${plan.cut.limit} prompt=${plan.cut.prompt} keep=${plan.cut.keep} new=${plan.cut.new}`,
      );
    const seen: OllamaSeen = { messages: keptMessages, truncated: plan.truncated, taskKept: plan.taskKept };
    call.answer = (options.reply ?? defaultOllamaReply)(++answered, req, seen);
    return { call };
  }

  const evalCount = (reply: Reply) =>
    Math.max(1, Math.ceil(Buffer.byteLength((reply.text ?? '') + (reply.call ? JSON.stringify(reply.call.args) : '')) / BYTES_PER_TOKEN));

  function nativeChat(req: Received, res: ServerResponse): void {
    const body = req.json;
    if (req.body.length === 0) return ginJson(res, 400, { error: 'missing request body' });
    if (body === undefined || body === null || typeof body !== 'object')
      return ginJson(res, 400, { error: 'invalid character in request body' });
    if (typeof body.model !== 'string' || body.model === '') return ginJson(res, 400, { error: 'model is required' });
    const name = find(body.model);
    if (!name) return ginJson(res, 404, { error: `model '${body.model}' not found` });
    const numCtx = runnerCtx(body.options);
    const messages: any[] = Array.isArray(body.messages)
      ? body.messages.map((m: any) => ({ ...m, role: String(m?.role ?? '').toLowerCase() }))
      : [];
    if (messages.length === 0) {
      load(name, numCtx);
      return ginJson(res, 200, {
        model: body.model,
        created_at: nowIso(),
        message: { role: 'assistant', content: '' },
        done: true,
        done_reason: 'load',
      });
    }
    const numKeep = Number.isInteger(body.options?.num_keep) ? body.options.num_keep : (options.numKeep ?? OLLAMA_DEFAULT_NUM_KEEP);
    const { call, refusal } = run(req, 'native', {
      name,
      messages,
      tools: body.tools,
      numCtx,
      numKeep,
      truncate: body.truncate !== false,
      shift: body.shift !== false,
    });
    const stream = body.stream !== false;
    if (refusal) {
      if (stream) {
        // streamResponse: an error before anything was written is a plain JSON answer.
        const text = goJson({ error: refusal.text });
        res.writeHead(refusal.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        return void res.end(text);
      }
      return ginJson(res, refusal.status, { error: refusal.text });
    }
    const reply = call.answer!;
    const toolCalls = reply.call
      ? [{ id: reply.call.id, function: { index: 0, name: reply.call.name, arguments: reply.call.args } }]
      : undefined;
    const metrics = {
      total_duration: 1_513_421_000,
      load_duration: 21_000_000,
      prompt_eval_count: call.keptTokens,
      prompt_eval_duration: 412_000_000,
      eval_count: evalCount(reply),
      eval_duration: 1_080_000_000,
    };
    if (!stream) {
      const message: any = { role: 'assistant', content: reply.text ?? '' };
      if (toolCalls && Array.isArray(body.tools) && body.tools.length > 0) message.tool_calls = toolCalls;
      return ginJson(res, 200, { model: body.model, created_at: nowIso(), message, done: true, done_reason: 'stop', ...metrics });
    }
    const lines: unknown[] = [];
    if (reply.text)
      lines.push({ model: body.model, created_at: nowIso(), message: { role: 'assistant', content: reply.text }, done: false });
    if (toolCalls)
      lines.push({
        model: body.model,
        created_at: nowIso(),
        message: { role: 'assistant', content: '', tool_calls: toolCalls },
        done: false,
      });
    lines.push({
      model: body.model,
      created_at: nowIso(),
      message: { role: 'assistant', content: '' },
      done: true,
      done_reason: 'stop',
      ...metrics,
    });
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    for (const line of lines) res.write(`${goJson(line)}\n`);
    res.end();
  }

  async function openaiChat(req: Received, res: ServerResponse): Promise<void> {
    const body = req.json;
    // ChatMiddleware's own refusals go out through gin's c.JSON (AbortWithStatusJSON), before ChatWriter.
    if (body === undefined || body === null || typeof body !== 'object')
      return ginJson(res, 400, ollamaOpenAIError(400, 'invalid character in request body'));
    if (!Array.isArray(body.messages) || body.messages.length === 0)
      return ginJson(res, 400, ollamaOpenAIError(400, "[] is too short - 'messages'"));
    // FromChatRequest: each part of an array content is a message of its own.
    const messages: any[] = [];
    for (const m of body.messages) {
      const role = String(m?.role ?? '');
      if (typeof m?.content === 'string')
        messages.push({ role, content: m.content, ...(m.tool_calls ? { tool_calls: m.tool_calls } : {}) });
      else if (Array.isArray(m?.content)) {
        const start = messages.length;
        for (const part of m.content) {
          if (part?.type === 'text' && typeof part.text === 'string') messages.push({ role, content: part.text });
          else if (part?.type === 'image_url') messages.push({ role, content: '', images: [part.image_url] });
          else return ginJson(res, 400, ollamaOpenAIError(400, 'invalid message format'));
        }
        if (m.tool_calls && messages.length > start) messages[messages.length - 1].tool_calls = m.tool_calls;
      } else if (m?.tool_calls) messages.push({ role, content: '', tool_calls: m.tool_calls });
      else return ginJson(res, 400, ollamaOpenAIError(400, `invalid message content type: ${goTypeOf(m?.content)}`));
    }
    if (typeof body.model !== 'string' || body.model === '') return encoderJson(res, 400, ollamaOpenAIError(400, 'model is required'));
    const name = find(body.model);
    if (!name) return encoderJson(res, 404, ollamaOpenAIError(404, `model '${body.model}' not found`));
    // The /v1 request has no `options`: the body's options.num_ctx never reaches the scheduler.
    const { call, refusal } = run(req, 'openai', {
      name,
      messages,
      tools: body.tools,
      numCtx: runnerCtx(undefined),
      numKeep: options.numKeep ?? OLLAMA_DEFAULT_NUM_KEEP,
      truncate: true,
      shift: true,
    });
    if (refusal) return encoderJson(res, refusal.status, ollamaOpenAIError(refusal.status, refusal.text));
    const reply = call.answer!;
    const id = `chatcmpl-${randomInt(999)}`;
    const created = Math.floor(Date.now() / 1000);
    const toolCalls = reply.call
      ? [{ id: reply.call.id, index: 0, type: 'function', function: { name: reply.call.name, arguments: JSON.stringify(reply.call.args) } }]
      : undefined;
    const completion = evalCount(reply);
    const usage = { prompt_tokens: call.keptTokens, completion_tokens: completion, total_tokens: call.keptTokens + completion };
    const finish = toolCalls ? 'tool_calls' : 'stop';
    if (body.stream !== true) {
      const message: any = { role: 'assistant', content: reply.text ?? '' };
      if (toolCalls) message.tool_calls = toolCalls;
      return encoderJson(res, 200, {
        id,
        object: 'chat.completion',
        created,
        model: body.model,
        system_fingerprint: 'fp_ollama',
        choices: [{ index: 0, message, finish_reason: finish }],
        usage,
      });
    }
    const base = { id, object: 'chat.completion.chunk', created, model: body.model, system_fingerprint: 'fp_ollama' };
    const chunks: unknown[] = [];
    const delta = (d: Record<string, unknown>) => ({
      ...base,
      choices: [{ index: 0, delta: chunks.length === 0 ? { role: 'assistant', ...d } : d, finish_reason: null }],
    });
    if (reply.text || !toolCalls) chunks.push(delta({ content: reply.text ?? '' }));
    if (toolCalls) chunks.push(delta({ content: '', tool_calls: toolCalls }));
    chunks.push({ ...base, choices: [{ index: 0, delta: {}, finish_reason: finish }] });
    if (body.stream_options?.include_usage === true) chunks.push({ ...base, choices: [], usage });
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const c of chunks) {
      res.write(`data: ${goJson(c)}\n\n`);
      // Each chunk is a token generated: the usage chunk comes that much after the first content.
      if (options.tokenDelayMs) await new Promise((resolve) => setTimeout(resolve, options.tokenDelayMs));
    }
    res.end('data: [DONE]\n\n');
  }

  return {
    ...upstream,
    chatCalls: () => [...calls],
    truncations: () => [...truncations],
    discoveryCalls: () => [...discovery],
    setNumCtx: (n: number) => {
      serverNumCtx = n;
      loaded.clear();
    },
    loaded: () => [...loaded.keys()],
  };
}
