import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { completion, json, sse, startFakeUpstream, streamEvents, type FakeUpstream, type Received } from './fake-upstream.js';
import { NGINX_413 } from './nginx.js';
import type { Reply } from './provider.js';
import { chatStreamOf } from './strict-chat.js';

/*
 * A vLLM-like chat-completions upstream with a context window of `window` tokens that holds
 * every request to it, the gateway's summarizer calls included, as vLLM does: a request is
 * refused with a 400 before a token is generated when its prompt and requested completion do
 * not fit. The words and envelope are vLLM's own, from `vllm/entrypoints/openai/serving_engine.py`
 * (its `_validate_prompt_and_tokenize`, later `_validate_input`) in three eras:
 *
 *   vllm-0.4   flat {"object":"error",...}. No max_tokens: vLLM sets it to window - prompt, and a
 *              prompt that leaves nothing fails SamplingParams ("max_tokens must be at least 1,
 *              got -186."): an overflow that states no limit.
 *   vllm-0.9   flat envelope (vllm-project/vllm@7ded96b3). No max_tokens: "you requested P tokens
 *              in the messages, Please reduce ..." (vLLM's comma) when the prompt is >= the window.
 *   vllm-0.10  nested {"error":{...}} envelope, the later wording: "your request has P input
 *              tokens" for a prompt >= the window, "'max_tokens' or 'max_completion_tokens' is too
 *              large" for prompt + completion over it.
 *
 * The era names are approximate; the texts are exact.
 *
 * vLLM counts the prompt with the model's tokenizer over the rendered chat template. This stand-in
 * counts ceil(UTF-8 bytes of the whole JSON body / 4): the rule is vLLM's, the count a fixed,
 * deterministic stand-in for one, which a test can recompute with `promptTokensOf`. The
 * completion is `max_completion_tokens`, else `max_tokens` (vLLM's order); when neither is set
 * vLLM gives the completion what the window leaves, so only the prompt is checked.
 */

export type VllmWording = 'vllm-0.4' | 'vllm-0.9' | 'vllm-0.10';

export interface WindowedProviderOptions {
  /** max_model_len: prompt + completion tokens one request may take. */
  window: number;
  /** Whose words the refusals use; vllm-0.9 unless told. */
  wording?: VllmWording;
  /** nginx's client_max_body_size in front of vLLM: a larger body gets nginx's 413 page, no numbers. */
  bodyLimitBytes?: number;
  /** What the model says to the n-th (1-based) accepted main call: text, a tool call, or both. Default: MAIN_ANSWER. */
  reply?: (n: number, req: Received) => Reply;
  /** The served model name (`--served-model-name`, else the model path), listed by GET /v1/models. Default 'fake-model'. */
  model?: string;
  /** The model path (`--model`), the card's `root`. Default: the served name. */
  modelPath?: string;
}

/** One request as the stand-in counted and answered it. */
export interface WindowedCall {
  received: Received;
  /** Marked `x-gateway-compaction: summarizer` by the gateway. */
  summarizer: boolean;
  promptTokens: number;
  /** The completion the request asked for; undefined when it set no limit. */
  completionTokens: number | undefined;
  status: number;
  /** The refusal's message (the 413 page for nginx), when refused. */
  error?: string;
  /** The answer's text, when accepted. */
  answer?: string;
  /** The answer's tool call, when `reply` asked for one. */
  toolCall?: Reply['call'];
}

export interface WindowedProvider extends FakeUpstream {
  window: number;
  /** Every request in arrival order. */
  calls(): WindowedCall[];
  mainCalls(): WindowedCall[];
  summarizerCalls(): WindowedCall[];
  /** The requests refused (by the window or by nginx), main and summarizer alike. */
  refusals(): WindowedCall[];
}

export const MAIN_ANSWER = 'rescued answer';

/** The stand-in's prompt count of a request body. */
function promptTokensOf(body: Buffer | string): number {
  return Math.ceil(Buffer.byteLength(body) / 4);
}

/** The completion a request asks for, read as vLLM does (`max_completion_tokens or max_tokens`). */
function completionTokensOf(request: any): number | undefined {
  const limit = (v: unknown) => (Number.isInteger(v) && (v as number) > 0 ? (v as number) : undefined);
  return limit(request?.max_completion_tokens) ?? limit(request?.max_tokens);
}

/**
 * vLLM's model list: `OpenAIModelRegistry.show_available_models` (vllm/entrypoints/openai/models/serving.py)
 * builds one ModelCard a served name, `ModelCard(id=name, max_model_len=max_model_len,
 * root=model_path, permission=[ModelPermission()])`, and the router answers
 * `JSONResponse(content=models.model_dump())`. The fields and defaults are the pydantic models'
 * (vllm/entrypoints/openai/engine/protocol.py, earlier openai/protocol.py): object "model",
 * owned_by "vllm", parent null, a permission "modelperm-<uuid hex>" of object "model_permission".
 */
function vllmModelList(model: string, maxModelLen: number, root: string = model) {
  const created = Math.floor(Date.now() / 1000);
  return {
    object: 'list',
    data: [
      {
        id: model,
        object: 'model',
        created,
        owned_by: 'vllm',
        root,
        parent: null,
        max_model_len: maxModelLen,
        permission: [
          {
            id: `modelperm-${randomBytes(16).toString('hex')}`,
            object: 'model_permission',
            created,
            allow_create_engine: false,
            allow_sampling: true,
            allow_logprobs: true,
            allow_search_indices: false,
            allow_view: true,
            allow_fine_tuning: false,
            organization: '*',
            group: null,
            is_blocking: false,
          },
        ],
      },
    ],
  };
}

export async function startWindowedProvider(options: WindowedProviderOptions): Promise<WindowedProvider> {
  const { window } = options;
  const wording = options.wording ?? 'vllm-0.9';
  const model = options.model ?? 'fake-model';
  const calls: WindowedCall[] = [];
  let summaries = 0;
  let mains = 0;
  const upstream = await startFakeUpstream(async (req, res) => {
    // Discovery, not a completion: answered apart, and not among the calls.
    if (req.method === 'GET' && req.url.split('?')[0] === '/v1/models')
      return json(res, 200, vllmModelList(model, window, options.modelPath ?? model));
    // vLLM's server is FastAPI: any other GET (llama.cpp's /props, Ollama's /api/version) is its plain 404.
    if (req.method === 'GET') return json(res, 404, { detail: 'Not Found' });
    const call: WindowedCall = {
      received: req,
      summarizer: req.headers['x-gateway-compaction'] === 'summarizer',
      promptTokens: promptTokensOf(req.body),
      completionTokens: completionTokensOf(req.json),
      status: 200,
    };
    calls.push(call);
    if (options.bodyLimitBytes !== undefined && req.body.length > options.bodyLimitBytes) {
      Object.assign(call, { status: 413, error: NGINX_413 });
      res.writeHead(413, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_413) });
      res.end(NGINX_413);
      return;
    }
    const refusal = refusalOf(wording, window, call.promptTokens, call.completionTokens);
    if (refusal !== undefined) {
      Object.assign(call, { status: 400, error: refusal.message });
      return json(res, 400, refusal.body);
    }
    // What the completion may take: its limit, or what the window leaves (vLLM's default).
    const room = call.completionTokens ?? window - call.promptTokens;
    if (!call.summarizer && options.reply) {
      const { text, call: toolCall } = options.reply(++mains, req);
      Object.assign(call, { answer: text ?? '', toolCall });
      return replyAnswer(res, req, call);
    }
    call.answer = call.summarizer ? summaryOf(req, ++summaries, room) : MAIN_ANSWER;
    await answer(res, req, call);
  });
  const by = (keep: (c: WindowedCall) => boolean) => () => calls.filter(keep);
  return {
    ...upstream,
    window,
    calls: () => [...calls],
    mainCalls: by((c) => !c.summarizer),
    summarizerCalls: by((c) => c.summarizer),
    refusals: by((c) => c.status !== 200),
  };
}

/** vLLM's 400 for a request that does not fit the window, or undefined when it fits. */
function refusalOf(
  wording: VllmWording,
  window: number,
  prompt: number,
  completion: number | undefined,
): { message: string; body: unknown } | undefined {
  const message = refusalMessage(wording, window, prompt, completion);
  if (message === undefined) return undefined;
  const error = { message, type: 'BadRequestError', param: null, code: 400 };
  return { message, body: wording === 'vllm-0.10' ? { error } : { object: 'error', ...error } };
}

function refusalMessage(wording: VllmWording, window: number, prompt: number, completion: number | undefined): string | undefined {
  const head = `This model's maximum context length is ${window} tokens.`;
  if (wording === 'vllm-0.10') {
    if (prompt >= window)
      return `${head} However, your request has ${prompt} input tokens. Please reduce the length of the input messages.`;
    if (completion !== undefined && prompt + completion > window) {
      return `'max_tokens' or 'max_completion_tokens' is too large: ${completion}. This model's maximum context length is ${window} tokens and your request has ${prompt} input tokens (${completion} > ${window} - ${prompt}).`;
    }
    return undefined;
  }
  if (completion !== undefined) {
    if (prompt + completion <= window) return undefined;
    return `${head} However, you requested ${prompt + completion} tokens (${prompt} in the messages, ${completion} in the completion). Please reduce the length of the messages or completion.`;
  }
  if (wording === 'vllm-0.4') return prompt < window ? undefined : `max_tokens must be at least 1, got ${window - prompt}.`;
  return prompt < window
    ? undefined
    : `${head} However, you requested ${prompt} tokens in the messages, Please reduce the length of the messages.`;
}

/**
 * A summary that keeps within the call's completion limit (four characters a token) and says
 * what it read, numbered so a test can find which one reached the replay.
 */
function summaryOf(req: Received, n: number, roomTokens: number): string {
  const transcript = String(req.json?.messages?.at(-1)?.content ?? '');
  const opening = transcript
    .replace(/<\/?conversation>/g, ' ')
    .split(/\s+/)
    .filter(Boolean)
    .slice(0, 6)
    .join(' ');
  const text = `Summary ${n} of ${transcript.length} characters: ${opening}`;
  return text.slice(0, Math.max(0, roomTokens * 4));
}

async function answer(res: ServerResponse, req: Received, call: WindowedCall): Promise<void> {
  const text = call.answer!;
  const id = call.summarizer ? 'chatcmpl-summary' : 'chatcmpl-windowed';
  if (req.json?.stream) return sse(res, streamEvents(call.summarizer ? [text] : ['rescued', ' answer'], id));
  const completionTokens = Math.ceil(text.length / 4);
  const usage = {
    prompt_tokens: call.promptTokens,
    completion_tokens: completionTokens,
    total_tokens: call.promptTokens + completionTokens,
  };
  json(res, 200, { ...completion(text, id), usage });
}

/** A scripted answer (text, a tool call, or both) as vLLM's OpenAI server writes it, whole or streamed. */
async function replyAnswer(res: ServerResponse, req: Received, call: WindowedCall): Promise<void> {
  const toolCalls = call.toolCall && [
    { id: call.toolCall.id, type: 'function', function: { name: call.toolCall.name, arguments: JSON.stringify(call.toolCall.args) } },
  ];
  const finish = toolCalls ? 'tool_calls' : 'stop';
  const base = { id: 'chatcmpl-windowed', created: 1_700_000_000, model: String(req.json?.model ?? 'fake-model') };
  const completionTokens = Math.ceil((call.answer!.length + JSON.stringify(toolCalls ?? []).length) / 4);
  const usage = {
    prompt_tokens: call.promptTokens,
    completion_tokens: completionTokens,
    total_tokens: call.promptTokens + completionTokens,
  };
  const message = { role: 'assistant', content: call.answer || null, ...(toolCalls ? { tool_calls: toolCalls } : {}) };
  if (!req.json?.stream)
    return json(res, 200, {
      ...base,
      object: 'chat.completion',
      choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
      usage,
    });
  return sse(res, chatStreamOf(base, message, req.json?.stream_options?.include_usage ? usage : null, { role: 'assistant', content: '' }));
}
