import type { Dialect, Entry, ErrorFacts, OverflowWords, Rendered, Slot, ToolOutput } from './types.js';
import { CODEX_COMPACTION } from './agents.js';
import { hasInlineData, isRecord, lastCount, partsText, positiveInt, str, type Json, usageOf, wireBytes, withField } from './parts.js';

/*
 * OpenAI chat completions: the conversation is `messages`. A tool result (`role: "tool"`, or the
 * legacy `role: "function"`) answers the assistant tool call with its `tool_call_id`.
 */

/** One element of a chat request's `messages`. Unknown fields are kept as they are. */
export interface ChatMessage {
  role: string;
  content?: unknown;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  [key: string]: unknown;
}

export interface ToolCall {
  id: string;
  type?: string;
  function?: { name?: string; arguments?: string };
  [key: string]: unknown;
}

const IMAGE_PARTS = new Set(['image_url', 'image', 'input_image']);

function describe(item: unknown): Entry {
  const m = isRecord(item) ? item : {};
  const role = str(m.role);
  const calls = role === 'assistant' && Array.isArray(m.tool_calls) ? m.tool_calls.map((c) => String(isRecord(c) ? c.id : c)) : [];
  if (role === 'tool') return { role: 'tool', calls, answers: [String(m.tool_call_id)], joinsNext: false };
  if (role === 'function') return { role: 'tool', calls, answers: [], joinsNext: false };
  if (role === 'system' || role === 'developer') return { role: 'instruction', calls, answers: [], joinsNext: false };
  return { role: role === 'user' ? 'user' : 'assistant', calls, answers: [], joinsNext: false };
}

function render(item: unknown): Rendered {
  const m = isRecord(item) ? item : {};
  const role = str(m.role) ?? 'unknown';
  const calls = (Array.isArray(m.tool_calls) ? m.tool_calls : []).filter(isRecord).map((c) => {
    const fn = isRecord(c.function) ? c.function : {};
    return { id: String(c.id), name: str(fn.name) ?? 'tool', args: str(fn.arguments) ?? '' };
  });
  if (role === 'tool') return { who: `tool result${m.tool_call_id ? ` ${m.tool_call_id}` : ''}`, text: partsText(m.content), calls };
  return { who: m.name ? `${role} (${m.name})` : role, text: partsText(m.content), calls };
}

function mask(item: unknown, label: (output: ToolOutput) => string): unknown | null {
  if (!isRecord(item) || item.role !== 'tool' || item.content == null) return null;
  return { ...item, content: label({ id: String(item.tool_call_id), text: partsText(item.content), bytes: wireBytes(item.content) }) };
}

function slots(item: unknown): Slot[] {
  if (!isRecord(item)) return [];
  const content = item.content;
  if (typeof content === 'string') return [{ kind: 'text', path: ['content'], text: content }];
  if (!Array.isArray(content)) return [];
  const out: Slot[] = [];
  content.forEach((part, p) => {
    if (!isRecord(part)) return;
    if (typeof part.type === 'string' && IMAGE_PARTS.has(part.type) && hasInlineData(part)) {
      out.push({ kind: 'image', path: ['content', p], value: part, placeholder: (text) => ({ type: 'text', text }) });
    } else if (typeof part.text === 'string') {
      out.push({ kind: 'text', path: ['content', p, 'text'], text: part.text });
    }
  });
  return out;
}

function completionField(request: Json): 'max_completion_tokens' | 'max_tokens' {
  return 'max_completion_tokens' in request ? 'max_completion_tokens' : 'max_tokens';
}

/** A gateway error as OpenAI's clients parse their provider's (the Responses API's too): the gateway's code in `code`. */
export function openAiErrorBody(e: ErrorFacts): { error: { message: string; type: string; code: string; param: string | null } } {
  return { error: { message: e.message, type: e.type, code: e.code, param: e.param } };
}

/** OpenAI's overflow error, naming the request's field of the conversation (`messages`, `input`). */
export function openAiOverflow(param: string): OverflowWords {
  return {
    says: (body) => /"code"\s*:\s*"context_length_exceeded"/.test(body),
    error: (prompt, limit) => ({
      error: {
        message: `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${prompt} tokens. Please reduce the length of the messages.`,
        type: 'invalid_request_error',
        param,
        code: 'context_length_exceeded',
      },
    }),
  };
}

/** OpenAI chat completions: pi, opencode, qwen-code, Aider and the OpenAI SDKs. */
export const chat: Dialect = {
  api: 'chat',
  title: 'Chat Completions',
  prefix: '/v1',
  upstreamBaseHoldsPrefix: true,
  clientBaseUrl: { name: 'openai', withPrefix: true },
  // With OpenAI's other paths, which its clients reach through the same base URL.
  missingPrefix: /^\/(chat\/completions|completions|embeddings|models)(\/|$)/,
  paths: /^\/v1\/chat\/completions(\/|\?|$)/,
  endpoints: [{ path: '/v1/chat/completions', upstreamPath: '/chat/completions' }],
  credential: 'bearer',
  errorBody: openAiErrorBody,
  telemetry: { operation: 'chat', provider: 'openai', openaiApiType: 'chat_completions' },
  // Codex speaks Chat Completions to a provider configured with `wire_api = "chat"`.
  agentCompactions: [CODEX_COMPACTION],
  modelWindow: null,
  read(request) {
    const messages = request.messages;
    if (!Array.isArray(messages) || messages.length === 0) return null;
    if (!messages.every((m) => isRecord(m) && typeof m.role === 'string')) return null;
    return { items: messages, entries: messages.map(describe) };
  },
  write: (request, items) => withField(request, 'messages', items),
  wireCount: (items) => items.length,
  describe,
  render,
  slots,
  mask,
  summaryItem: (text, role) => ({ role, content: text }),
  completion: (request) => positiveInt(request.max_completion_tokens) ?? positiveInt(request.max_tokens),
  withCompletion: (request, tokens) => withField(request, completionField(request), tokens),
  problems: () => [],
  streamEvent: null,
  serverSideRescue: () => null,
  bound: null,
  droppedState: null,
  promptCount: (answer) => lastCount(answer, 'prompt_tokens'),
  overflow: openAiOverflow('messages'),
  summarizer: {
    credential: 'bearer',
    path: () => '/chat/completions',
    body: ({ model, instructions, transcript, maxTokens, request }) => ({
      model,
      messages: [
        { role: 'system', content: instructions },
        { role: 'user', content: transcript },
      ],
      [completionField(request)]: maxTokens,
      stream: false,
    }),
    text(answer) {
      const choices = isRecord(answer) && Array.isArray(answer.choices) ? answer.choices : [];
      const message = isRecord(choices[0]) && isRecord(choices[0].message) ? choices[0].message : {};
      return str(message.content);
    },
    usage: (answer) => usageOf(answer, 'usage', 'prompt_tokens', 'completion_tokens'),
    headers: () => ({}),
  },
};
