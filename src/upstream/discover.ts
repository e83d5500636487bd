import type { Dispatcher } from 'undici';
import { API_PREFIXES, DIALECTS, underBase } from '../dialects/index.js';
import type { Api } from '../dialects/types.js';
import { discard, holdBody } from './body.js';
import type { Upstream } from './upstreams.js';
import { tryParseJson } from '../lib/json.js';

/** The header the gateway marks its own calls with (rescue/context.ts has it too; upstream/ may not import rescue/). */
const COMPACTION_HEADER = 'x-gateway-compaction';

/*
 * Only these servers' own fields are believed, never a model's trained context (Ollama's `model_info.*.context_length`,
 * llama.cpp's `n_ctx_train`): a server runs a model with a smaller window than it was trained for. Answers are bounded and timed.
 *
 *   Ollama     GET /api/ps: `context_length` of a loaded model; else POST /api/show: `num_ctx` when the Modelfile sets it.
 *   llama.cpp  GET /props: `default_generation_settings.n_ctx` (one slot's window).
 *   a list     GET {base}/models: `max_model_len` (vLLM, SGLang), `context_length` (OpenRouter), `loaded_context_length` /
 *              `max_context_length` (LM Studio), `meta.n_ctx` (llama.cpp's list), `max_input_tokens`.
 *   an API's   where its dialect's `modelWindow` says (Gemini: models.get, `inputTokenLimit`).
 *
 * Which server an upstream is is asked once (Ollama answers /api/version, llama.cpp /props).
 */

/** What a server said of one model's window; `completionCounted`: whether its window holds the completion too. */
export interface Found {
  tokens: number;
  completionCounted: boolean;
  /** Where it was read, for the log line: `ollama /api/ps`, `vllm /v1/models`, ... */
  from: string;
}

/** What a discovery found: a window, or none, and whether to ask again soon (a model not loaded yet). */
export interface Discovered {
  found: Found | null;
  soon: boolean;
}

export type ServerKind = 'ollama' | 'llamacpp' | 'list';

const CALL_MS = 5_000;
const ANSWER_LIMIT_BYTES = 1024 * 1024;
/** A window below this is no window a server would run an agent with: a misread field. */
const SMALLEST_WINDOW = 256;

/** The credentials a discovery call carries: those the request itself goes upstream with, to the same origin, and nothing else. */
const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'x-goog-api-key', 'anthropic-version', 'api-key'];

export function credentialsOf(headers: Record<string, string | string[]>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name of CREDENTIAL_HEADERS) if (headers[name] !== undefined) out[name] = headers[name];
  return out;
}

export class Discoverer {
  constructor(private readonly dispatcher: Dispatcher) {}

  /** Which server `upstream` is: asked of the server's root (the base URL without its `/v1`). */
  async kindOf(upstream: Upstream, headers: Record<string, string | string[]>): Promise<ServerKind> {
    const root = rootOf(upstream);
    const version = await this.get(upstream, `${root}/api/version`, headers);
    if (isRecord(version) && typeof version.version === 'string') return 'ollama';
    const props = await this.get(upstream, `${root}/props`, headers);
    if (isRecord(props) && isRecord(props.default_generation_settings)) return 'llamacpp';
    return 'list';
  }

  async window(
    kind: ServerKind,
    upstream: Upstream,
    api: Api,
    model: string,
    headers: Record<string, string | string[]>,
  ): Promise<Discovered> {
    const base = upstream.target.basePath;
    const { prefix, modelWindow } = DIALECTS[api];
    if (modelWindow) {
      const card = await this.get(upstream, `${underBase(base, prefix)}${modelWindow.path(model)}`, headers);
      return { found: windowOf(isRecord(card) ? modelWindow.tokens(card) : undefined, false, modelWindow.from), soon: false };
    }
    if (kind === 'ollama') return this.ollama(upstream, model, headers);
    if (kind === 'llamacpp') {
      const props = await this.get(upstream, `${rootOf(upstream)}/props`, headers);
      const settings = isRecord(props) && isRecord(props.default_generation_settings) ? props.default_generation_settings : undefined;
      return { found: windowOf(settings?.n_ctx, false, 'llama.cpp /props'), soon: false };
    }
    const list = await this.get(upstream, `${base}/models`, headers);
    const data = isRecord(list) && Array.isArray(list.data) ? list.data : [];
    const card = data.find((m): m is Record<string, unknown> => isRecord(m) && m.id === model);
    return { found: card ? fromCard(card) : null, soon: false };
  }

  private async ollama(upstream: Upstream, model: string, headers: Record<string, string | string[]>): Promise<Discovered> {
    const root = rootOf(upstream);
    const ps = await this.get(upstream, `${root}/api/ps`, headers);
    const loaded = (isRecord(ps) && Array.isArray(ps.models) ? ps.models : []).find(
      (m): m is Record<string, unknown> => isRecord(m) && sameOllamaModel(m, model),
    );
    const running = windowOf(loaded?.context_length, false, 'ollama /api/ps');
    if (running) return { found: running, soon: false };
    const show = await this.get(upstream, `${root}/api/show`, headers, { model });
    const parameters = isRecord(show) && typeof show.parameters === 'string' ? show.parameters : '';
    const numCtx = /(?:^|\n)\s*num_ctx\s+(\d+)/.exec(parameters)?.[1];
    const declared = windowOf(numCtx === undefined ? undefined : Number(numCtx), false, 'ollama /api/show num_ctx');
    // Not loaded yet: Ollama loads a model on its first request, and /api/ps tells its window then.
    return { found: declared, soon: declared === null && loaded === undefined };
  }

  private async get(upstream: Upstream, path: string, headers: Record<string, string | string[]>, body?: unknown): Promise<unknown> {
    const signal = AbortSignal.timeout(CALL_MS);
    try {
      const res = await this.dispatcher.request({
        origin: upstream.target.origin,
        path,
        method: body === undefined ? 'GET' : 'POST',
        // Marked as the gateway's own, as its summarizer calls are: an upstream's log tells them apart.
        headers: {
          ...credentialsOf(headers),
          accept: 'application/json',
          [COMPACTION_HEADER]: 'discovery',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
      if (res.statusCode !== 200 || res.headers['content-encoding'] !== undefined) {
        discard(res.body);
        return undefined;
      }
      const held = await holdBody(res.body, ANSWER_LIMIT_BYTES);
      if (!held.complete) {
        discard(res.body);
        return undefined;
      }
      return tryParseJson(held.bytes.toString('utf8'));
    } catch {
      return undefined;
    }
  }
}

/** The server's root: the base URL without its API version (`http://host:11434/v1` is `http://host:11434`). */
function rootOf(upstream: Upstream): string {
  const base = upstream.target.basePath;
  const prefix = API_PREFIXES.find((p) => base.endsWith(p));
  return prefix ? base.slice(0, -prefix.length) : base;
}

/** Ollama names a model `qwen3:8b`; a request may say `qwen3` for `qwen3:latest`. */
function sameOllamaModel(card: Record<string, unknown>, model: string): boolean {
  const names = [card.name, card.model].filter((n): n is string => typeof n === 'string');
  return names.some((n) => n === model || n === `${model}:latest`);
}

function fromCard(card: Record<string, unknown>): Found | null {
  const meta = isRecord(card.meta) ? card.meta : {};
  return (
    windowOf(card.max_model_len, true, 'max_model_len') ??
    windowOf(card.context_length, true, 'context_length') ??
    windowOf(card.loaded_context_length, false, 'loaded_context_length') ??
    windowOf(card.max_context_length, false, 'max_context_length') ??
    windowOf(meta.n_ctx, false, 'meta.n_ctx') ??
    windowOf(card.max_input_tokens, false, 'max_input_tokens')
  );
}

function windowOf(value: unknown, completionCounted: boolean, from: string): Found | null {
  return typeof value === 'number' && Number.isInteger(value) && value >= SMALLEST_WINDOW
    ? { tokens: value, completionCounted, from }
    : null;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
