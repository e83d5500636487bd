import { json, startFakeUpstream, type FakeUpstream, type Received } from './fake-upstream.js';
import { startStandIn, type StandIn, type StandInOptions } from './provider.js';
import type { WindowedProvider } from './windowed-provider.js';

/*
 * Three providers on loopback, as one gateway with several upstreams meets them: an OpenAI that
 * serves chat and Responses, an Anthropic that serves Messages, and a local chat-only model (vLLM
 * behind an nginx body limit). Each is a front door that checks what a provider checks before it
 * looks at a body (the path it serves, the credential it was given) and answers in that
 * provider's own error shape; what passes goes to the strict stand-in for its API. The front
 * records every request as it arrived, with the status it got, so a test can read every header
 * each provider ever saw. A summary a provider writes is signed with its name ("SUMMARY by
 * openai of ..."), so a compacted request shows whose summary it carries.
 */

export type ProviderName = 'openai' | 'anthropic' | 'local';

export interface Call {
  received: Received;
  status: number;
  summarizer: boolean;
  /** The body of a refusal (status 400 and up), as the provider wrote it. */
  error?: string;
}

export interface Provider {
  name: ProviderName;
  /** origin + '/v1': what the gateway's upstream url is. */
  baseUrl: string;
  calls(): Call[];
  close(): Promise<void>;
}

export interface ProviderOptions {
  /** Bodies over this many bytes are refused, each in its API's way (local: by nginx's 413). Default: no limit. */
  limitBytes?: number;
  /** The credentials it accepts; undefined: any or none (a local vLLM started without --api-key). */
  keys?: readonly string[];
  /** What the model says (the stand-in's `reply`; local's with api 'chat'). Default: each stand-in's own text. */
  reply?: StandInOptions['reply'];
  /** Local only: vLLM's window in tokens, prompt and completion together. Default: wide, so nginx's body limit is what refuses. */
  window?: number;
}

interface Backend {
  path: RegExp;
  upstream: FakeUpstream;
}

const bearer = (r: Received) => /^Bearer (.+)$/.exec(String(r.headers.authorization ?? ''))?.[1];

/** Where each provider looks for its key: Anthropic takes an x-api-key or, as its SDK sends it, a Bearer token. */
const CREDENTIAL: Record<ProviderName, (r: Received) => string | undefined> = {
  openai: bearer,
  anthropic: (r) => (typeof r.headers['x-api-key'] === 'string' ? r.headers['x-api-key'] : bearer(r)),
  local: bearer,
};

/** What each provider says to an unknown path, and to a missing or wrong key. */
function refuse(name: ProviderName, res: Parameters<typeof json>[0], status: 404 | 401, req: Received): void {
  if (name === 'anthropic') {
    const error =
      status === 404 ? { type: 'not_found_error', message: 'Not Found' } : { type: 'authentication_error', message: 'invalid x-api-key' };
    return json(res, status, { type: 'error', error });
  }
  if (status === 404)
    return json(res, 404, {
      error: { message: `Invalid URL (${req.method} ${req.url})`, type: 'invalid_request_error', param: null, code: null },
    });
  json(res, 401, {
    error: { message: 'Incorrect API key provided.', type: 'invalid_request_error', param: null, code: 'invalid_api_key' },
  });
}

/** Only what the stand-ins read goes through to them: the body's type, the summarizer mark, Anthropic's beta list. */
const FORWARDED = ['content-type', 'x-gateway-compaction', 'anthropic-beta', 'anthropic-version'];

async function front(name: ProviderName, options: ProviderOptions, backends: Backend[]): Promise<Provider> {
  const calls: Call[] = [];
  const server = await startFakeUpstream(async (req, res) => {
    const call: Call = { received: req, status: 0, summarizer: req.headers['x-gateway-compaction'] === 'summarizer' };
    calls.push(call);
    const backend = req.method === 'POST' ? backends.find((b) => b.path.test(req.url)) : undefined;
    if (!backend) {
      call.status = 404;
      return refuse(name, res, 404, req);
    }
    const key = CREDENTIAL[name](req);
    if (options.keys && (key === undefined || !options.keys.includes(key))) {
      call.status = 401;
      return refuse(name, res, 401, req);
    }
    const headers: Record<string, string> = {};
    for (const h of FORWARDED) if (typeof req.headers[h] === 'string') headers[h] = req.headers[h];
    const answer = await fetch(`${backend.upstream.origin}${req.url}`, {
      method: 'POST',
      headers,
      body: req.body,
      signal: AbortSignal.timeout(10_000),
    });
    let body = Buffer.from(await answer.arrayBuffer());
    if (call.summarizer) body = Buffer.from(body.toString('utf8').replace(/\b(SUMMARY|Summary \d+) of\b/g, `$1 by ${name} of`));
    call.status = answer.status;
    if (answer.status >= 400) call.error = body.toString('utf8');
    res.writeHead(answer.status, {
      'content-type': answer.headers.get('content-type') ?? 'application/json',
      'content-length': body.length,
    });
    res.end(body);
  });
  return {
    name,
    baseUrl: server.baseUrl,
    calls: () => [...calls],
    close: async () => {
      await server.close();
      await Promise.all([...new Set(backends.map((b) => b.upstream))].map((u) => u.close()));
    },
  };
}

/** OpenAI: /v1/responses and /v1/chat/completions to the stand-in's strict rules (chat says 'rescued answer' unless told). */
export async function startOpenAi(options: ProviderOptions): Promise<Provider> {
  const reply = options.reply ?? ((api) => (api === 'chat' ? { text: 'rescued answer' } : {}));
  const standIn: StandIn = await startStandIn({ limitBytes: options.limitBytes, tooLong: 'stated', reply });
  return front('openai', options, [
    { path: /^\/v1\/responses(\?|$)/, upstream: standIn },
    { path: /^\/v1\/chat\/completions(\?|$)/, upstream: standIn },
  ]);
}

/** Anthropic: /v1/messages (with its query) to the stand-in's strict Messages rules, prompt_too_long past the limit. */
export async function startAnthropicProvider(options: ProviderOptions): Promise<Provider> {
  const messages: StandIn = await startStandIn({ limitBytes: options.limitBytes, tooLong: 'stated', reply: options.reply });
  return front('anthropic', options, [{ path: /^\/v1\/messages(\?|$)/, upstream: messages }]);
}

/** A local model: chat completions only, a vLLM behind an nginx whose body limit answers 413 with no numbers. */
export async function startLocal(options: ProviderOptions): Promise<Provider> {
  // The window is wide: nginx's body limit is the one that refuses, so the gateway must compact (a
  // stated window with room left would let it lower max_tokens instead).
  const reply = options.reply;
  const vllm: WindowedProvider = await startStandIn({
    provider: 'windowed',
    window: options.window ?? 1_000_000,
    bodyLimitBytes: options.limitBytes,
    reply: reply && ((n: number, req: Received) => reply('chat', n, req)),
  });
  return front('local', options, [{ path: /^\/v1\/chat\/completions$/, upstream: vllm }]);
}

/** Every credential a request carries, wherever a client or a gateway might put one. */
export function credentialsOf(r: Received): string[] {
  const out: string[] = [];
  for (const h of ['authorization', 'x-api-key', 'api-key', 'x-goog-api-key']) {
    const v = r.headers[h];
    if (typeof v === 'string') out.push(`${h}: ${v}`);
  }
  return out;
}

/** Whether a secret appears anywhere in what a provider received: any header, the URL, the body. */
export function carries(r: Received, secret: string): boolean {
  return r.url.includes(secret) || JSON.stringify(r.headers).includes(secret) || r.body.includes(secret);
}
