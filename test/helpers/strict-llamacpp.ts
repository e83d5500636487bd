import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { startFakeUpstream, type FakeUpstream, type Received } from './fake-upstream.js';
import type { Reply } from './provider.js';
import { BYTES_PER_TOKEN, llamaExceedBody, llamaExceedMessage, messageTokens, promptTokensOf, toolsTokens } from './strict-ollama.js';

export { promptTokensOf };

/*
 * A strict stand-in for llama.cpp's llama-server (github:ggml-org/llama.cpp, tools/server, 2026),
 * read from its source, not copied:
 *
 *   tools/server/server-context.cpp   update_slots: a prompt of n_tokens >= the slot's n_ctx is refused
 *                                     before anything is decoded, "request (N tokens) exceeds the
 *                                     available context size (M tokens), try increasing it",
 *                                     ERROR_TYPE_EXCEED_CONTEXT_SIZE (no truncation, context shift or
 *                                     not); handle_completions_impl: "in streaming mode, the first error
 *                                     must be treated as non-stream response", so a stream is refused
 *                                     with the same 400; get_res_props (/props: default_generation_settings
 *                                     {params, n_ctx}, total_slots, model_alias, model_ftype, model_path,
 *                                     modalities, ... build_info, is_sleeping); get_res_models (/v1/models,
 *                                     also /models: an Ollama-style `models` list, then
 *                                     `object`, `data` with `meta` {vocab_type, n_vocab, n_ctx, n_ctx_train,
 *                                     n_embd, n_params, size, ftype}; builds of 2025 wrote no n_ctx, no
 *                                     ftype, no aliases/tags: `era: '2025'`); get_health {"status":"ok"}.
 *   tools/server/server-common.cpp    format_error_response: {code, message, type}, exceed_context_size
 *                                     -> 400 "exceed_context_size_error".
 *   tools/server/server-task.cpp      server_task_result_error::to_json adds n_prompt_tokens and n_ctx;
 *                                     to_json_oaicompat_chat (choices, created, model, system_fingerprint =
 *                                     build info, object, usage with prompt_tokens_details.cached_tokens,
 *                                     id, timings); the stream: a first {"role":"assistant","content":null}
 *                                     delta, the diffs, a finish chunk with an empty delta, the usage chunk
 *                                     only with stream_options.include_usage, timings on the last chunk,
 *                                     then "data: [DONE]".
 *   tools/server/server.cpp           the routes (no /api/tags, /api/show any more); `--parallel` auto ->
 *                                     4 slots, kv_unified; ex_wrapper: invalid_argument -> 400.
 *   tools/server/server-http.cpp      "Server: llama.cpp"; JSON as application/json; charset=utf-8; an
 *                                     unknown route (or method) {"error":{"message":"File Not Found",
 *                                     "type":"not_found_error","code":404}}.
 *   common/chat.cpp                   common_chat_msg::to_json_oaicompat: role, content ("" when empty),
 *                                     tool_calls [{type, function {name, arguments}, id}].
 *
 * The prompt is counted with the Ollama stand-in's deterministic count (`promptTokensOf`): the
 * rendered chat, not the request's bytes. The prompt cache is modelled at message granularity:
 * cached_tokens is the tokens of the messages (and tools) shared with the previous request.
 *
 * It does not import src/.
 */

type LlamaCppEra = 'current' | '2025';

export interface LlamaCppOptions {
  /** The slot's context (`-c`, per slot). */
  nCtx: number;
  /** The model's name (`--alias`, else the file name). Default 'Qwen3-8B-Q4_K_M.gguf'. */
  model?: string;
  /** `-m`. Default /models/<model>. */
  modelPath?: string;
  /** The GGUF's trained context. Default 40960. */
  nCtxTrain?: number;
  /** `--parallel`. Default: current builds' auto (-1), which tools/server/server.cpp makes 4 slots with a unified KV cache, each slot seeing the whole n_ctx; 1 for 2025 builds. */
  totalSlots?: number;
  /** llama_build_info(): the system_fingerprint and /props build_info. */
  buildInfo?: string;
  /** Which build's /props and /v1/models fields. Default 'current'. */
  era?: LlamaCppEra;
  /** What the model says to the n-th (1-based) answered chat call. Default: the text 'ok'. */
  reply?: (n: number, req: Received) => Reply;
}

interface LlamaCppCall {
  received: Received;
  promptTokens: number;
  cachedTokens: number;
  status: number;
  /** The refusal's message, when refused. */
  error?: string;
  answer?: Reply;
}

export interface LlamaCpp extends FakeUpstream {
  nCtx: number;
  /** Every chat call, refused or answered, in order. */
  calls(): LlamaCppCall[];
  refusals(): LlamaCppCall[];
  /** Every GET to /props, /models, /v1/models, /health. */
  discoveryCalls(): Received[];
}

const NOT_FOUND = JSON.stringify({ error: { message: 'File Not Found', type: 'not_found_error', code: 404 } });

function send(res: ServerResponse, status: number, text: string, type = 'application/json; charset=utf-8'): void {
  res.writeHead(status, { server: 'llama.cpp', 'content-type': type, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const invalid = (message: string) => JSON.stringify({ error: { code: 400, message, type: 'invalid_request_error' } });

export async function startLlamaCpp(options: LlamaCppOptions): Promise<LlamaCpp> {
  const { nCtx } = options;
  const model = options.model ?? 'Qwen3-8B-Q4_K_M.gguf';
  const modelPath = options.modelPath ?? `/models/${model.endsWith('.gguf') ? model : 'model.gguf'}`;
  const nCtxTrain = options.nCtxTrain ?? 40_960;
  const buildInfo = options.buildInfo ?? 'b7112-3f2d9a1c';
  const era = options.era ?? 'current';
  const calls: LlamaCppCall[] = [];
  const discovery: Received[] = [];
  let previous: { messages: string[]; tools: string } | null = null;
  let answered = 0;

  const props = () => {
    const params = {
      seed: 4294967295,
      temperature: 0.8,
      dynatemp_range: 0,
      dynatemp_exponent: 1,
      top_k: 40,
      top_p: 0.95,
      min_p: 0.05,
      typical_p: 1,
      repeat_last_n: 64,
      repeat_penalty: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      n_predict: -1,
      n_keep: 0,
      n_discard: 0,
      ignore_eos: false,
      stream: true,
      n_probs: 0,
      min_keep: 0,
      chat_format: 'Content-only',
      reasoning_format: 'deepseek',
      samplers: ['penalties', 'dry', 'top_n_sigma', 'top_k', 'typ_p', 'top_p', 'min_p', 'xtc', 'temperature'],
    };
    const template =
      "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
    if (era === '2025') {
      return {
        default_generation_settings: { params, n_ctx: nCtx },
        total_slots: options.totalSlots ?? 1,
        model_alias: model,
        model_path: modelPath,
        modalities: { vision: false, audio: false },
        endpoint_slots: true,
        endpoint_props: false,
        endpoint_metrics: false,
        webui: true,
        chat_template: template,
        bos_token: '<|endoftext|>',
        eos_token: '<|im_end|>',
        build_info: buildInfo,
      };
    }
    return {
      default_generation_settings: { params, n_ctx: nCtx },
      total_slots: options.totalSlots ?? 4,
      model_alias: model,
      model_ftype: 'Q4_K - Medium',
      model_path: modelPath,
      modalities: { vision: false, video: false, audio: false },
      media_marker: '<__media__>',
      endpoint_slots: true,
      endpoint_props: false,
      endpoint_metrics: false,
      ui: true,
      ui_settings: {},
      chat_template: template,
      chat_template_caps: {
        supports_tools: true,
        supports_tool_calls: true,
        supports_system_role: true,
        supports_parallel_tool_calls: true,
        supports_string_content: true,
        supports_typed_content: false,
      },
      bos_token: '<|endoftext|>',
      eos_token: '<|im_end|>',
      build_info: buildInfo,
      is_sleeping: false,
      cors_proxy_enabled: false,
    };
  };

  const models = () => {
    const meta2025 = { vocab_type: 2, n_vocab: 151936, n_ctx_train: nCtxTrain, n_embd: 4096, n_params: 8_190_735_360, size: 5_025_629_184 };
    const card =
      era === '2025'
        ? { id: model, object: 'model', created: Math.floor(Date.now() / 1000), owned_by: 'llamacpp', meta: meta2025 }
        : {
            id: model,
            aliases: [],
            tags: [],
            object: 'model',
            created: Math.floor(Date.now() / 1000),
            owned_by: 'llamacpp',
            meta: {
              vocab_type: 2,
              n_vocab: 151936,
              n_ctx: nCtx,
              n_ctx_train: nCtxTrain,
              n_embd: 4096,
              n_params: 8_190_735_360,
              size: 5_025_629_184,
              ftype: 'Q4_K - Medium',
            },
          };
    return {
      models: [
        {
          name: model,
          model,
          modified_at: '',
          size: '',
          digest: '',
          type: 'model',
          description: '',
          tags: [''],
          capabilities: ['completion'],
          parameters: '',
          details: { parent_model: '', format: 'gguf', family: '', families: [''], parameter_size: '', quantization_level: '' },
        },
      ],
      object: 'list',
      data: [card],
    };
  };

  const upstream = await startFakeUpstream(async (req, res) => {
    const path = req.url.split('?')[0];
    const get = req.method === 'GET' || req.method === 'HEAD';
    if (get && ['/health', '/v1/health', '/props', '/models', '/v1/models'].includes(path)) discovery.push(req);
    if (get && (path === '/health' || path === '/v1/health')) return send(res, 200, JSON.stringify({ status: 'ok' }));
    if (get && path === '/props') return send(res, 200, JSON.stringify(props()));
    if (get && (path === '/models' || path === '/v1/models')) return send(res, 200, JSON.stringify(models()));
    if (req.method === 'POST' && (path === '/chat/completions' || path === '/v1/chat/completions')) return chat(req, res);
    return send(res, 404, NOT_FOUND);
  });

  function chat(req: Received, res: ServerResponse): void {
    const body = req.json;
    if (body === undefined || body === null || typeof body !== 'object')
      return send(res, 500, JSON.stringify({ error: { code: 500, message: 'Invalid JSON body', type: 'server_error' } }));
    if (!('messages' in body)) return send(res, 400, invalid("'messages' is required"));
    if (!Array.isArray(body.messages)) return send(res, 400, invalid("Expected 'messages' to be an array"));
    const messages: any[] = body.messages;
    const promptTokens = promptTokensOf(messages, body.tools);
    // The prompt cache: the tokens of what this prompt shares with the slot's previous one.
    const now = { messages: messages.map((m) => JSON.stringify(m)), tools: JSON.stringify(body.tools ?? null) };
    let cached = 0;
    if (previous && previous.tools === now.tools) {
      cached = toolsTokens(body.tools);
      for (let i = 0; i < now.messages.length && i < previous.messages.length && now.messages[i] === previous.messages[i]; i++)
        cached += messageTokens(messages[i]);
      // [TAG_PROMPT_LOGITS]: at least one token is evaluated.
      cached = Math.min(cached, promptTokens - 1);
    }
    const call: LlamaCppCall = { received: req, promptTokens, cachedTokens: 0, status: 200 };
    calls.push(call);
    if (promptTokens >= nCtx) {
      Object.assign(call, { status: 400, error: llamaExceedMessage(promptTokens, nCtx) });
      return send(res, 400, llamaExceedBody(promptTokens, nCtx));
    }
    previous = now;
    call.cachedTokens = cached;
    const n = ++answered;
    const reply = options.reply ? options.reply(n, req) : { text: 'ok' };
    call.answer = reply;
    const completion = Math.max(
      1,
      Math.ceil(Buffer.byteLength((reply.text ?? '') + (reply.call ? JSON.stringify(reply.call.args) : '')) / BYTES_PER_TOKEN),
    );
    const id = `chatcmpl-${randomBytes(24)
      .toString('base64')
      .replace(/[^0-9A-Za-z]/g, 'x')
      .slice(0, 32)}`;
    const created = Math.floor(Date.now() / 1000);
    const usage = {
      completion_tokens: completion,
      prompt_tokens: promptTokens,
      total_tokens: promptTokens + completion,
      prompt_tokens_details: { cached_tokens: cached },
    };
    const promptN = promptTokens - cached;
    const timings = {
      cache_n: cached,
      prompt_n: promptN,
      prompt_ms: promptN * 0.5,
      prompt_per_token_ms: 0.5,
      prompt_per_second: 2000,
      predicted_n: completion,
      predicted_ms: completion * 20,
      predicted_per_token_ms: 20,
      predicted_per_second: 50,
    };
    const toolCalls = reply.call
      ? [{ type: 'function', function: { name: reply.call.name, arguments: JSON.stringify(reply.call.args) }, id: reply.call.id }]
      : undefined;
    const finish = toolCalls ? 'tool_calls' : 'stop';
    if (body.stream !== true) {
      const message: any = { role: 'assistant', content: reply.text ?? '' };
      if (toolCalls) message.tool_calls = toolCalls;
      return send(
        res,
        200,
        JSON.stringify({
          choices: [{ finish_reason: finish, index: 0, message }],
          created,
          model,
          system_fingerprint: buildInfo,
          object: 'chat.completion',
          usage,
          id,
          timings,
        }),
      );
    }
    const chunk = (finish_reason: string | null, delta: unknown) => ({
      choices: [{ finish_reason, index: 0, delta }],
      created,
      id,
      model,
      system_fingerprint: buildInfo,
      object: 'chat.completion.chunk',
    });
    const chunks: Record<string, unknown>[] = [chunk(null, { role: 'assistant', content: null })];
    if (reply.text) chunks.push(chunk(null, { content: reply.text }));
    if (reply.call)
      chunks.push(
        chunk(null, {
          tool_calls: [
            {
              index: 0,
              id: reply.call.id,
              type: 'function',
              function: { name: reply.call.name, arguments: JSON.stringify(reply.call.args) },
            },
          ],
        }),
      );
    chunks.push(chunk(finish, {}));
    if (body.stream_options?.include_usage === true)
      chunks.push({ choices: [], created, id, model, system_fingerprint: buildInfo, object: 'chat.completion.chunk', usage });
    chunks[chunks.length - 1].timings = timings;
    res.writeHead(200, { server: 'llama.cpp', 'content-type': 'text/event-stream' });
    for (const c of chunks) res.write(`data: ${JSON.stringify(c)}\n\n`);
    res.end('data: [DONE]\n\n');
  }

  return {
    ...upstream,
    nCtx,
    calls: () => [...calls],
    refusals: () => calls.filter((c) => c.status !== 200),
    discoveryCalls: () => [...discovery],
  };
}
