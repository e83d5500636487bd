import type { Dialect, Entry, Rendered, Slot, StreamEventKind, ToolOutput } from './types.js';
import { CODEX_COMPACTION } from './agents.js';
import { openAiErrorBody, openAiOverflow } from './chat.js';
import {
  countEntries,
  hasInlineData,
  heldTransformations,
  isRecord,
  lastCount,
  partsText,
  positiveInt,
  str,
  type Json,
  usageOf,
  wireBytes,
  withField,
} from './parts.js';

/*
 * OpenAI Responses (Codex CLI): `input` items; every `*_call` is answered by the `*_call_output` with its `call_id`. Reasoning and
 * compaction items are provider state: kept or dropped whole, a reasoning item always with the item after it (the API refuses a
 * call without its reasoning). Newer models silently drop a reasoning item whose prefix changed and list it in
 * `input_transformations`: the gateway counts those and strips nothing. `previous_response_id` keeps history upstream.
 */

const OPAQUE = new Set(['reasoning', 'compaction', 'compaction_summary', 'item_reference']);
const PREAMBLE = new Set(['response.created', 'response.in_progress', 'response.queued']);
const FAILURE = new Set(['response.failed', 'error']);

function typeOf(item: Json): string {
  return str(item.type) ?? (typeof item.role === 'string' ? 'message' : 'unknown');
}

function callId(item: Json): string {
  return String(item.call_id ?? item.id);
}

function describe(raw: unknown): Entry {
  const item = isRecord(raw) ? raw : {};
  const type = typeOf(item);
  if (OPAQUE.has(type)) return { role: 'opaque', calls: [], answers: [], joinsNext: type === 'reasoning' };
  if (type.endsWith('_call_output')) return { role: 'tool', calls: [], answers: [callId(item)], joinsNext: false };
  if (type.endsWith('_call')) return { role: 'assistant', calls: [callId(item)], answers: [], joinsNext: false };
  const role = str(item.role);
  if (role === 'system' || role === 'developer') return { role: 'instruction', calls: [], answers: [], joinsNext: false };
  return { role: role === 'user' ? 'user' : 'assistant', calls: [], answers: [], joinsNext: false };
}

function render(raw: unknown): Rendered {
  const item = isRecord(raw) ? raw : {};
  const type = typeOf(item);
  if (type === 'message') return { who: str(item.role) ?? 'unknown', text: partsText(item.content), calls: [] };
  if (type === 'function_call' || type === 'custom_tool_call') {
    return {
      who: 'assistant',
      text: '',
      calls: [{ id: callId(item), name: str(item.name) ?? 'tool', args: str(item.arguments) ?? str(item.input) ?? '' }],
    };
  }
  if (type.endsWith('_call_output')) {
    const output = typeof item.output === 'string' ? item.output : partsText(item.output);
    return { who: `tool result ${callId(item)}`, text: output, calls: [] };
  }
  if (type.endsWith('_call')) {
    const action = item.action ?? item.arguments ?? item.input ?? '';
    return {
      who: 'assistant',
      text: '',
      calls: [{ id: callId(item), name: type.replace(/_call$/, ''), args: typeof action === 'string' ? action : JSON.stringify(action) }],
    };
  }
  return { who: type, text: '', calls: [] };
}

/** Outputs that are text (a string or input parts); a screenshot or a shell's structured output stays. */
const MASKABLE = new Set(['function_call_output', 'custom_tool_call_output', 'local_shell_call_output']);

function mask(raw: unknown, label: (output: ToolOutput) => string): unknown | null {
  if (!isRecord(raw) || !MASKABLE.has(typeOf(raw)) || raw.output == null) return null;
  const text = typeof raw.output === 'string' ? raw.output : partsText(raw.output);
  return { ...raw, output: label({ id: callId(raw), text, bytes: wireBytes(raw.output) }) };
}

function slots(raw: unknown): Slot[] {
  if (!isRecord(raw)) return [];
  const type = typeOf(raw);
  if (type === 'message') return contentSlots(raw.content, 'content', raw.role === 'assistant' ? 'output_text' : 'input_text');
  if (type.endsWith('_call_output')) return contentSlots(raw.output, 'output', 'input_text');
  return [];
}

function contentSlots(content: unknown, key: string, textType: string): Slot[] {
  if (typeof content === 'string') return [{ kind: 'text', path: [key], text: content }];
  if (!Array.isArray(content)) return [];
  const out: Slot[] = [];
  content.forEach((part, p) => {
    if (!isRecord(part)) return;
    if (part.type === 'input_image' && hasInlineData(part)) {
      out.push({ kind: 'image', path: [key, p], value: part, placeholder: (text) => ({ type: textType, text }) });
    } else if (typeof part.text === 'string') {
      out.push({ kind: 'text', path: [key, p, 'text'], text: part.text });
    }
  });
  return out;
}

/** The event's type: the SSE `event:` field, or the `type` the data names first. */
function streamEvent(event: string | undefined, data: string): StreamEventKind {
  const type = event ?? /"type"\s*:\s*"([^"]+)"/.exec(data.slice(0, 200))?.[1];
  if (type && PREAMBLE.has(type)) return 'preamble';
  return type && FAILURE.has(type) ? 'failure' : 'output';
}

/** The OpenAI Responses API: Codex CLI, and its own compaction call, which can overflow too. */
export const responses: Dialect = {
  api: 'responses',
  title: 'Responses',
  prefix: '/v1',
  upstreamBaseHoldsPrefix: true,
  clientBaseUrl: { name: 'openai', withPrefix: true },
  missingPrefix: /^\/responses(\/|$)/,
  paths: /^\/v1\/responses(\/|\?|$)/,
  endpoints: [
    { path: '/v1/responses', upstreamPath: '/responses' },
    { path: '/v1/responses/compact', upstreamPath: '/responses/compact' },
  ],
  credential: 'bearer',
  errorBody: openAiErrorBody,
  telemetry: { operation: 'chat', provider: 'openai', openaiApiType: 'responses' },
  agentCompactions: [CODEX_COMPACTION],
  modelWindow: null,
  read(request) {
    if (typeof request.previous_response_id === 'string') return null;
    const input = request.input;
    if (typeof input === 'string') return input ? single(input) : null;
    if (!Array.isArray(input) || input.length === 0 || !input.every(isRecord)) return null;
    return { items: input, entries: input.map(describe) };
  },
  write: (request, items) => withField(request, 'input', items),
  wireCount: (items) => items.length,
  describe,
  render,
  slots,
  mask,
  summaryItem: (text, role) => ({ type: 'message', role, content: [{ type: role === 'assistant' ? 'output_text' : 'input_text', text }] }),
  completion: (request) => positiveInt(request.max_output_tokens),
  withCompletion: (request, tokens) => withField(request, 'max_output_tokens', tokens),
  problems: () => [],
  streamEvent,
  bound: null,
  // On a stream the list comes with the response object of the first events.
  droppedState: (held) =>
    countEntries(
      heldTransformations(held, (event) => (isRecord(event.response) ? event.response.input_transformations : undefined)),
      { type: 'reasoning', action: 'removed' },
    ),
  serverSideRescue(request) {
    if (typeof request.previous_response_id !== 'string' || request.truncation === 'auto') return null;
    return withField(request, 'truncation', 'auto');
  },
  promptCount: (answer) => lastCount(answer, 'input_tokens'),
  overflow: openAiOverflow('input'),
  summarizer: {
    credential: 'bearer',
    path: () => '/responses',
    body: ({ model, instructions, transcript, maxTokens }) => ({
      model,
      instructions,
      input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: transcript }] }],
      max_output_tokens: maxTokens,
      store: false,
      stream: false,
    }),
    text(answer) {
      if (!isRecord(answer)) return undefined;
      if (typeof answer.output_text === 'string') return answer.output_text;
      const messages = (Array.isArray(answer.output) ? answer.output : []).filter((o) => isRecord(o) && o.type === 'message');
      const text = messages.map((m) => partsText((m as Json).content)).join('\n');
      return text || undefined;
    },
    usage: (answer) => usageOf(answer, 'usage', 'input_tokens', 'output_tokens'),
    headers: () => ({}),
    // The provider keeps a reasoning item valid after its own compaction item, never after ours.
    compact: {
      path: '/responses/compact',
      body: ({ model, items, request }) => ({
        model,
        input: items,
        ...(typeof request.instructions === 'string' ? { instructions: request.instructions } : {}),
      }),
      window(answer) {
        if (!isRecord(answer) || !Array.isArray(answer.output)) return undefined;
        return answer.output.some((o) => isRecord(o) && o.type === 'compaction') ? answer.output : undefined;
      },
    },
  },
};

/** A string `input` is one user message; it goes back as a list, which the API accepts alike. */
function single(text: string) {
  const item = { type: 'message', role: 'user', content: text };
  return { items: [item], entries: [describe(item)] };
}
