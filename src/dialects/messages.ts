import type { BoundState, Dialect, Entry, ErrorFacts, Rendered, Slot, StreamEventKind, ToolOutput } from './types.js';
import { CLAUDE_CODE_COMPACTION } from './agents.js';
import { derive } from '../lib/json-source.js';
import {
  countEntries,
  heldTransformations,
  isRecord,
  lastCount,
  positiveInt,
  str,
  type Json,
  usageOf,
  wireBytes,
  withField,
  withFlag,
} from './parts.js';

/*
 * Anthropic Messages (Claude Code): `system` and `tools` are outside `messages` and go back as sent. `tool_result` blocks answer the
 * previous message's `tool_use` and must come first in its content; server tools pair inside one assistant message. A `role: "system"`
 * entry inside `messages` (Claude Code sends one) is an instruction, kept in place.
 *
 * `thinking`/`redacted_thinking` blocks are signed and bound to everything before them (system, tools, every earlier message and
 * block, by value, cache_control aside), and kept ones must be an unbroken run of what the model produced. So a message holding one
 * is never shortened; after the edit point a stale block is removed from the run's start, or kept under `drop_block` (`bound`).
 *
 * Turns must alternate, the user's first: a user-role summary between kept messages means write() merges same-role neighbours.
 */

const THINKING = new Set(['thinking', 'redacted_thinking']);
const MEDIA = new Set(['image', 'document']);
const PREAMBLE = new Set(['message_start', 'ping']);
/** The API counts at most this many `cache_control` breakpoints over system, tools and messages. */
export const MAX_BREAKPOINTS = 4;
const DEFAULT_VERSION = '2023-06-01';

function blocksOf(message: Json): unknown[] {
  return Array.isArray(message.content) ? message.content : [];
}

function ofType(message: Json, type: string): Json[] {
  return blocksOf(message).filter((b): b is Json => isRecord(b) && b.type === type);
}

function describe(item: unknown): Entry {
  const m = isRecord(item) ? item : {};
  const role = str(m.role);
  if (role === 'system') return { role: 'instruction', calls: [], answers: [], joinsNext: false };
  if (role === 'assistant')
    return { role: 'assistant', calls: ofType(m, 'tool_use').map((b) => String(b.id)), answers: [], joinsNext: false };
  const answers = ofType(m, 'tool_result').map((b) => String(b.tool_use_id));
  return { role: answers.length > 0 ? 'tool' : 'user', calls: [], answers, joinsNext: false };
}

/** The readable text of a content value: strings and text blocks; media as a short marker. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((b) => {
      if (!isRecord(b)) return '';
      if (b.type === 'text' && typeof b.text === 'string') return b.text;
      if (b.type === 'tool_result') return contentText(b.content);
      if (typeof b.type === 'string' && MEDIA.has(b.type)) return `[${b.type}]`;
      return '';
    })
    .filter(Boolean)
    .join('\n');
}

function render(item: unknown): Rendered {
  const m = isRecord(item) ? item : {};
  const role = str(m.role) ?? 'unknown';
  const calls = blocksOf(m)
    .filter((b): b is Json => isRecord(b) && (b.type === 'tool_use' || b.type === 'server_tool_use'))
    .map((b) => ({ id: String(b.id), name: str(b.name) ?? 'tool', args: JSON.stringify(b.input ?? {}) }));
  const answers = describe(m).answers;
  const who = answers.length > 0 ? `tool result ${answers.join(', ')}` : role;
  // Thinking is the model's signed state: it is not read, only kept or dropped with its message.
  return { who, text: contentText(m.content), calls };
}

/** A user message's tool results, each as one line; its other blocks (the person's words) as sent. */
function mask(item: unknown, label: (output: ToolOutput) => string): unknown | null {
  if (!isRecord(item) || item.role !== 'user' || ofType(item, 'tool_result').length === 0) return null;
  const content = blocksOf(item).map((b) =>
    isRecord(b) && b.type === 'tool_result' && b.content != null
      ? { ...b, content: label({ id: String(b.tool_use_id), text: contentText(b.content), bytes: wireBytes(b.content) }) }
      : b,
  );
  return { ...item, content };
}

function slots(item: unknown): Slot[] {
  if (!isRecord(item)) return [];
  const content = item.content;
  if (typeof content === 'string') return [{ kind: 'text', path: ['content'], text: content }];
  if (!Array.isArray(content)) return [];
  if (item.role === 'assistant' && content.some((b) => isRecord(b) && typeof b.type === 'string' && THINKING.has(b.type))) return [];
  const out: Slot[] = [];
  content.forEach((block, p) => {
    if (!isRecord(block)) return;
    if (block.type === 'tool_result') {
      if (typeof block.content === 'string') out.push({ kind: 'text', path: ['content', p, 'content'], text: block.content });
      else if (Array.isArray(block.content)) block.content.forEach((inner, q) => blockSlots(out, inner, ['content', p, 'content', q]));
    } else {
      blockSlots(out, block, ['content', p]);
    }
  });
  return out;
}

/** A text block's text, a plain-text document's data, or a base64 image/document as a whole. */
function blockSlots(out: Slot[], block: unknown, path: (string | number)[]): void {
  if (!isRecord(block)) return;
  const source = isRecord(block.source) ? block.source : undefined;
  if (block.type === 'text' && typeof block.text === 'string') {
    out.push({ kind: 'text', path: [...path, 'text'], text: block.text });
  } else if (typeof block.type === 'string' && MEDIA.has(block.type) && source?.type === 'base64') {
    out.push({ kind: 'image', path, value: block, placeholder: (text) => ({ type: 'text', text }) });
  } else if (block.type === 'document' && source?.type === 'text' && typeof source.data === 'string') {
    out.push({ kind: 'text', path: [...path, 'source', 'data'], text: source.data });
  }
}

// What goes on the wire: same-role turns merged

function isTurn(item: unknown): item is Json & { role: 'user' | 'assistant' } {
  return isRecord(item) && (item.role === 'user' || item.role === 'assistant');
}

function asBlocks(content: unknown): unknown[] {
  if (Array.isArray(content)) return content;
  // An empty text block is refused by the API; an empty string carries nothing.
  return typeof content === 'string' && content !== '' ? [{ type: 'text', text: content }] : [];
}

/** One turn from a run of the same role; a user turn's tool results stay first, in order. */
function merge(run: Json[]): Json {
  const blocks = run.flatMap((m) => asBlocks(m.content));
  if (run[0].role !== 'user') return { ...run[0], content: blocks };
  const isResult = (x: unknown) => isRecord(x) && x.type === 'tool_result';
  return { ...run[0], content: [...blocks.filter(isResult), ...blocks.filter((x) => !isResult(x))] };
}

/** A message after one of the same role (system entries between do not count) is merged into it; unmerged ones stay byte-identical. */
export function wireMessages(items: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  const runs = new Map<number, Json[]>();
  let lastTurn = -1;
  for (const item of items) {
    if (isTurn(item) && lastTurn >= 0 && (out[lastTurn] as Json).role === item.role) {
      runs.get(lastTurn)!.push(item);
      continue;
    }
    if (isTurn(item)) runs.set((lastTurn = out.length), [item]);
    out.push(item);
  }
  for (const [at, run] of runs) if (run.length > 1) out[at] = merge(run);
  return out;
}

/** What the API would refuse in these messages once written (ids, not positions, so that a
 * problem the original already had is recognised as the same one). */
function problems(items: unknown[]): string[] {
  const messages = wireMessages(items);
  const found: string[] = [];
  // Turns alternate once merged; the first must be the user's.
  const first = messages.find(isTurn);
  if (first && first.role !== 'user') found.push('the first turn is not a user turn');
  messages.forEach((m, i) => {
    if (!isRecord(m)) return;
    const previous = i > 0 && isRecord(messages[i - 1]) ? (messages[i - 1] as Json) : undefined;
    const issued = new Set(previous?.role === 'assistant' ? ofType(previous, 'tool_use').map((b) => String(b.id)) : []);
    let otherSeen = false;
    for (const block of blocksOf(m)) {
      if (!isRecord(block) || block.type !== 'tool_result') {
        otherSeen = true;
        continue;
      }
      const id = JSON.stringify(String(block.tool_use_id));
      if (m.role !== 'user' || !issued.has(String(block.tool_use_id)))
        found.push(`the tool_result for ${id} is not right after its tool_use`);
      if (otherSeen) found.push(`the tool_result for ${id} is not at the start of its message`);
    }
    const next = messages[i + 1];
    if (m.role === 'assistant' && next !== undefined) {
      const answered = new Set(isRecord(next) ? ofType(next, 'tool_result').map((b) => String(b.tool_use_id)) : []);
      for (const use of ofType(m, 'tool_use')) {
        if (!answered.has(String(use.id))) found.push(`the tool_use ${JSON.stringify(String(use.id))} is not answered in the next message`);
      }
    }
  });
  if (breakpoints(messages) > MAX_BREAKPOINTS) found.push(`more than ${MAX_BREAKPOINTS} cache_control breakpoints`);
  return found;
}

// cache_control breakpoints

function marked(block: unknown): boolean {
  return isRecord(block) && block.cache_control != null;
}

/** Breakpoints in messages: on content blocks and on blocks inside tool results. */
export function breakpoints(messages: readonly unknown[]): number {
  let n = 0;
  for (const m of messages) {
    for (const block of isRecord(m) ? blocksOf(m) : []) {
      if (marked(block)) n++;
      if (isRecord(block) && Array.isArray(block.content)) n += block.content.filter(marked).length;
    }
  }
  return n;
}

/** Compaction cannot add a breakpoint; this guarantees it: any above the original's count go, oldest first (the newest caches most). */
function withinBreakpoints(original: Json, messages: unknown[]): unknown[] {
  const before = Array.isArray(original.messages) ? breakpoints(original.messages) : 0;
  let excess = breakpoints(messages) - before;
  if (excess <= 0) return messages;
  const strip = (block: unknown): unknown => {
    if (!isRecord(block)) return block;
    let out = block;
    if (excess > 0 && marked(out)) {
      const { cache_control: _dropped, ...rest } = out;
      out = rest;
      excess--;
    }
    return Array.isArray(out.content) && excess > 0 ? { ...out, content: out.content.map(strip) } : out;
  };
  return messages.map((m) => (excess > 0 && isRecord(m) && Array.isArray(m.content) ? { ...m, content: m.content.map(strip) } : m));
}

// Preserved thinking

/** The beta that lets a request carry `thinking.block_binding`. */
export const BINDING_BETA = 'thinking-binding-controls-2026-08-01';

function isThinking(block: unknown): boolean {
  return isRecord(block) && typeof block.type === 'string' && THINKING.has(block.type);
}

function thinkingOf(request: Json): Json | undefined {
  return isRecord(request.thinking) ? request.thinking : undefined;
}

/**
 * With thinking `enabled`, an open tool round's last assistant message must start with its thinking: a stale one stays under
 * `drop_block`.
 */
function isOpenRound(request: Json, items: readonly unknown[], i: number): boolean {
  if (thinkingOf(request)?.type !== 'enabled') return false;
  const lastAssistant = items.findLastIndex((m) => isRecord(m) && m.role === 'assistant');
  if (i !== lastAssistant) return false;
  // Every item after it is the user's (or a system entry): on the wire they are one user message,
  // its tool results first (see wireMessages).
  const after = items.slice(i + 1);
  if (after.length === 0 || !after.every((m) => isRecord(m) && (m.role === 'user' || m.role === 'system'))) return false;
  const answered = new Set(after.flatMap((m) => ofType(m as Json, 'tool_result').map((b) => String(b.tool_use_id))));
  return ofType(items[i] as Json, 'tool_use').some((b) => answered.has(String(b.id)));
}

const bound: BoundState = {
  count: (item) => (isRecord(item) && item.role === 'assistant' ? blocksOf(item).filter(isThinking).length : 0),
  strip(item) {
    const message = item as Json;
    const content = blocksOf(message).filter((b) => !isThinking(b));
    return content.length > 0 ? { ...message, content } : null;
  },
  mustKeep: isOpenRound,
  optIn(request, headers) {
    const thinking = thinkingOf(request);
    // Never with thinking off: then the blocks are removed by hand.
    if (!thinking || thinking.type === 'disabled') return null;
    if (thinking.block_binding !== undefined) {
      // The caller's own choice goes as sent; it covers stale blocks only when it drops them.
      const own = isRecord(thinking.block_binding) ? thinking.block_binding.prefix_mismatch_behavior : undefined;
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- without it tsc joins the two arms' headers into { 'anthropic-beta'?: undefined }
      return own === 'drop_block' ? { request, headers: {} as Record<string, string>, added: false } : null;
    }
    return {
      request: derive(request, { thinking: { ...thinking, block_binding: { prefix_mismatch_behavior: 'drop_block' } } }),
      headers: { 'anthropic-beta': withFlag(headers['anthropic-beta'], BINDING_BETA) },
      added: true,
    };
  },
};

function streamEvent(event: string | undefined, data: string): StreamEventKind {
  const type = event ?? /"type"\s*:\s*"([^"]+)"/.exec(data.slice(0, 200))?.[1];
  if (type && PREAMBLE.has(type)) return 'preamble';
  // A message that ends before any content block (its stop reason comes first) is judged like an
  // error: the classifier reads whether it stopped because the input filled the window.
  return type === 'error' || type === 'message_delta' ? 'failure' : 'output';
}

/** Anthropic's error type by status as its error docs list them, and the gateway's code in an extra `code`. */
function anthropicErrorBody(e: ErrorFacts): unknown {
  return {
    type: 'error',
    error: {
      type: ANTHROPIC_TYPES[e.status] ?? (e.status >= 500 ? 'api_error' : 'invalid_request_error'),
      message: e.message,
      code: e.code,
    },
  };
}

const ANTHROPIC_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

/** Claude Code adds `?beta=true`, kept on the way up; the gateway's own key goes as `x-api-key`; count_tokens and the rest pass through. */
export const messages: Dialect = {
  api: 'messages',
  title: 'Anthropic Messages',
  prefix: '/v1',
  upstreamBaseHoldsPrefix: true,
  clientBaseUrl: { name: 'anthropic', withPrefix: false },
  missingPrefix: /^\/messages(\/|$)/,
  paths: /^\/v1\/messages(\/|\?|$)/,
  endpoints: [{ path: '/v1/messages', upstreamPath: '/messages' }],
  credential: 'x-api-key',
  errorBody: anthropicErrorBody,
  telemetry: { operation: 'chat', provider: 'anthropic' },
  agentCompactions: [CLAUDE_CODE_COMPACTION],
  modelWindow: null,
  read(request) {
    const list = request.messages;
    if (!Array.isArray(list) || list.length === 0) return null;
    if (!list.every((m) => isRecord(m) && typeof m.role === 'string')) return null;
    return { items: list, entries: list.map(describe) };
  },
  write: (request, items) => withField(request, 'messages', withinBreakpoints(request, wireMessages(items))),
  wireCount: (items) => wireMessages(items).length,
  describe,
  render,
  slots,
  mask,
  // The API has no system turn to spare for it: a summary is always the user's.
  summaryItem: (text) => ({ role: 'user', content: [{ type: 'text', text }] }),
  completion: (request) => positiveInt(request.max_tokens),
  withCompletion(request, tokens) {
    const thinking = isRecord(request.thinking) ? request.thinking : {};
    // The thinking budget must stay below max_tokens: lowering it past that is refused.
    const budget = positiveInt(thinking.budget_tokens);
    return budget !== undefined && budget >= tokens ? null : withField(request, 'max_tokens', tokens);
  },
  problems,
  streamEvent,
  serverSideRescue: () => null,
  bound,
  // A stream carries the list on message_start's message; a JSON answer at its top level.
  droppedState: (held) =>
    countEntries(
      heldTransformations(held, (event) => (isRecord(event.message) ? event.message.input_transformations : undefined)),
      { type: 'thinking_dropped' },
    ),
  // Anthropic counts cache reads and writes apart from input_tokens; the prompt is all three.
  promptCount: (answer) => {
    const input = lastCount(answer, 'input_tokens');
    return input === undefined
      ? undefined
      : input + (lastCount(answer, 'cache_creation_input_tokens') ?? 0) + (lastCount(answer, 'cache_read_input_tokens') ?? 0);
  },
  overflow: {
    says: (body) => body.includes('prompt is too long'),
    error: (prompt, limit) => ({
      type: 'error',
      error: { type: 'invalid_request_error', message: `prompt is too long: ${prompt} tokens > ${limit} maximum` },
    }),
  },
  summarizer: {
    credential: 'x-api-key',
    path: () => '/messages',
    body: ({ model, instructions, transcript, maxTokens }) => ({
      model,
      system: instructions,
      messages: [{ role: 'user', content: transcript }],
      max_tokens: maxTokens,
    }),
    text(answer) {
      const content = isRecord(answer) && Array.isArray(answer.content) ? answer.content : [];
      const text = content
        .filter((b): b is Json => isRecord(b) && b.type === 'text' && typeof b.text === 'string')
        .map((b) => b.text as string)
        .join('\n');
      return text || undefined;
    },
    usage: (answer) => usageOf(answer, 'usage', 'input_tokens', 'output_tokens'),
    headers: (requestHeaders) => {
      const version = requestHeaders['anthropic-version'];
      const headers: Record<string, string> = { 'anthropic-version': typeof version === 'string' ? version : DEFAULT_VERSION };
      // The request's other betas change the request, not the call; an OAuth token (Claude Code
      // signed in to a subscription) is refused without its own beta flag.
      const beta = requestHeaders['anthropic-beta'];
      const oauth = (typeof beta === 'string' ? beta.split(',') : []).map((b) => b.trim()).filter((b) => b.startsWith('oauth-'));
      if (oauth.length > 0) headers['anthropic-beta'] = oauth.join(',');
      return headers;
    },
  },
};
