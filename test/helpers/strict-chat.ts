import type { ServerResponse } from 'node:http';
import { json, startFakeUpstream, type FakeUpstream, type Handler, type Received } from './fake-upstream.js';
import { NGINX_413 } from './nginx.js';

/*
 * A strict stand-in for OpenAI's chat completions: it checks what the API checks of a messages
 * list and answers with the API's own 400s (their words, their typo): a `tool` message must
 * answer a `tool_calls` of the assistant message before it, and every tool_call_id of an
 * assistant message must be answered by the tool messages right after it. A body past the window
 * is refused as a deployment does: a 400 stating the window (4 bytes a token), an edge's 413 page,
 * or, on a stream, an in-band error event after the 200.
 *
 * It does not import src/: a stand-in must not depend on the code it judges.
 */

export const BYTES_PER_TOKEN = 4;
export const tokensOf = (bytes: number) => Math.ceil(bytes / BYTES_PER_TOKEN);

export type StrictChatReject = 'context_length' | 'edge_413' | 'sse_in_band';

export interface StrictChatOptions {
  /** Bodies larger than this are over the window (limitBytes / 4 tokens). Default: no limit. */
  limitBytes?: number;
  /** How a body over limitBytes is refused. Default context_length. */
  style?: StrictChatReject;
  /** What the model says. Default: the text 'next step'. Both: the text, then the call. */
  reply?: (req: Received) => { text?: string; toolCall?: { id: string; name: string; arguments: string } };
}

interface ChatCheck {
  /** The error message it answered with (pairs, shape, window or size), if any. */
  refused: string | null;
}

export interface StrictChatRules {
  handle: Handler;
  /** One per non-summarizer request, in order. */
  checks(): ChatCheck[];
  /** The assistant message each answered non-summarizer request got. */
  issued(): Array<{ call: number; message: unknown }>;
}

export interface StrictChat extends FakeUpstream, Omit<StrictChatRules, 'handle'> {
  chatCalls(): Received[];
  summarizerCalls(): Received[];
}

export const CHAT_MESSAGES = {
  model: 'you must provide a model parameter',
  messages: "Missing required parameter: 'messages'.",
  toolWithoutCall: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
  unanswered: (ids: string[]) =>
    `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${ids.join(', ')}`,
  window: (limit: number, tokens: number) =>
    `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
};

const isSummarizer = (r: Received) => r.headers['x-gateway-compaction'] === 'summarizer';

interface Refusal {
  message: string;
  param: string | null;
  code: string | null;
}

/** The chat completions rules as a handler, for one server or a route of a shared one. */
export function strictChatRules(options: StrictChatOptions = {}): StrictChatRules {
  const checks: ChatCheck[] = [];
  const issued: Array<{ call: number; message: unknown }> = [];
  let seen = 0;
  let answered = 0;
  const handle: Handler = (req, res) => {
    const summarizer = isSummarizer(req);
    const check: ChatCheck = { refused: null };
    const call = summarizer ? -1 : seen++;
    if (!summarizer) checks.push(check);
    const over = req.body.length > (options.limitBytes ?? Infinity);
    const style = options.style ?? 'context_length';
    if (over && style === 'edge_413') {
      check.refused = '413 Request Entity Too Large';
      res.writeHead(413, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_413) });
      return void res.end(NGINX_413);
    }
    const refusal = shapeProblem(req.json) ?? (over ? windowRefusal(req.body.length, options.limitBytes!) : null);
    if (refusal) {
      check.refused = refusal.message;
      const error = { message: refusal.message, type: 'invalid_request_error', param: refusal.param, code: refusal.code };
      if (over && style === 'sse_in_band' && req.json.stream === true && refusal.code === 'context_length_exceeded')
        return writeEvents(res, [`data: ${JSON.stringify({ error })}\n\n`]);
      return json(res, 400, { error });
    }
    const n = ++answered;
    const prompt = tokensOf(req.body.length);
    let message: any;
    if (summarizer) {
      const transcript = String(req.json.messages.at(-1)?.content ?? '');
      message = { role: 'assistant', content: `SUMMARY of ${transcript.length} chars: the user asked to fix the build.`, refusal: null };
    } else {
      const reply = options.reply?.(req) ?? {};
      const text = reply.text ?? (reply.toolCall ? null : 'next step');
      message = { role: 'assistant', content: text, refusal: null };
      if (reply.toolCall)
        message.tool_calls = [
          { id: reply.toolCall.id, type: 'function', function: { name: reply.toolCall.name, arguments: reply.toolCall.arguments } },
        ];
      issued.push({ call, message });
    }
    const finish = message.tool_calls ? 'tool_calls' : 'stop';
    const id = `chatcmpl-strict-${n}`;
    const base = { id, created: 1_700_000_000, model: String(req.json.model) };
    if (req.json.stream === true)
      return writeEvents(res, chatStreamOf(base, message, { prompt_tokens: prompt, completion_tokens: 5, total_tokens: prompt + 5 }));
    json(res, 200, {
      ...base,
      object: 'chat.completion',
      choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
      usage: { prompt_tokens: prompt, completion_tokens: 5, total_tokens: prompt + 5 },
    });
  };
  return { handle, checks: () => checks, issued: () => issued };
}

export async function startStrictChat(options: StrictChatOptions = {}): Promise<StrictChat> {
  const rules = strictChatRules(options);
  const upstream = await startFakeUpstream(rules.handle);
  return {
    ...upstream,
    chatCalls: () => upstream.received.filter((r) => !isSummarizer(r)),
    summarizerCalls: () => upstream.received.filter(isSummarizer),
    checks: rules.checks,
    issued: rules.issued,
  };
}

/** The API's checks of the body, in its order: model, messages, then the tool pairs. */
function shapeProblem(body: any): Refusal | null {
  if (body === null || typeof body !== 'object' || typeof body.model !== 'string' || body.model === '')
    return { message: CHAT_MESSAGES.model, param: null, code: null };
  if (!Array.isArray(body.messages)) return { message: CHAT_MESSAGES.messages, param: null, code: 'missing_required_parameter' };
  const messages: any[] = body.messages;
  for (const [i, m] of messages.entries()) {
    if (m?.role === 'tool') {
      // Tool messages answer the nearest assistant message with tool_calls, with only tool messages between.
      let k = i - 1;
      while (k >= 0 && messages[k]?.role === 'tool') k--;
      const ids = Array.isArray(messages[k]?.tool_calls) ? messages[k].tool_calls.map((c: any) => c?.id) : [];
      if (messages[k]?.role !== 'assistant' || !ids.includes(m.tool_call_id))
        return { message: CHAT_MESSAGES.toolWithoutCall, param: `messages.[${i}].role`, code: null };
    }
    if (m?.role === 'assistant' && Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
      const answered = new Set<string>();
      for (let k = i + 1; k < messages.length && messages[k]?.role === 'tool'; k++) answered.add(messages[k].tool_call_id);
      const missing = m.tool_calls.map((c: any) => String(c?.id)).filter((id: string) => !answered.has(id));
      if (missing.length > 0) return { message: CHAT_MESSAGES.unanswered(missing), param: `messages.[${i}].role`, code: null };
    }
  }
  return null;
}

/** The body of the API's 400 for `bytes` over a window of `limitBytes`, as the rules send it. */
export function windowError(bytes: number, limitBytes: number) {
  const refusal = windowRefusal(bytes, limitBytes);
  return { error: { message: refusal.message, type: 'invalid_request_error', param: refusal.param, code: refusal.code } };
}

function windowRefusal(bytes: number, limitBytes: number): Refusal {
  return {
    message: CHAT_MESSAGES.window(Math.floor(limitBytes / BYTES_PER_TOKEN), tokensOf(bytes)),
    param: 'messages',
    code: 'context_length_exceeded',
  };
}

/**
 * A streamed answer as a chat completions server writes it: the role, the content, each call, the
 * finish, the usage when it is sent, [DONE]. OpenAI's first delta says `refusal: null`; vLLM's does not.
 */
export function chatStreamOf(
  base: Record<string, unknown>,
  message: any,
  usage: Record<string, number> | null,
  roleDelta: Record<string, unknown> = { role: 'assistant', content: '', refusal: null },
): string[] {
  const chunk = (delta: unknown, finish_reason: string | null = null) => ({
    ...base,
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, logprobs: null, finish_reason }],
  });
  const chunks: unknown[] = [chunk(roleDelta)];
  if (message.content) chunks.push(chunk({ content: message.content }));
  (message.tool_calls ?? []).forEach((c: any, index: number) => chunks.push(chunk({ tool_calls: [{ index, ...c }] })));
  chunks.push(chunk({}, message.tool_calls ? 'tool_calls' : 'stop'));
  if (usage) chunks.push({ ...base, object: 'chat.completion.chunk', choices: [], usage });
  return [...chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`), 'data: [DONE]\n\n'];
}

function writeEvents(res: ServerResponse, events: string[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const e of events) res.write(e);
  res.end();
}
