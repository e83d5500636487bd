import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { json, startFakeUpstream, type FakeUpstream, type Handler, type Received } from './fake-upstream.js';
import { NGINX_413 } from './nginx.js';
import { digest, seal, unseal } from './signed.js';

/*
 * A strict stand-in for the Anthropic Messages API with preserved thinking: every answer starts
 * with a signed thinking block bound to the request it answered, and every thinking block sent
 * back is checked the way the docs describe (preserved-thinking, "Keeping the prefix unchanged"):
 * system, tools and the content before the block must have the same values as when the block was
 * created, and the thinking blocks kept must be an unbroken run of the original sequence. It
 * answers with the API's own errors, in the API's order of checks.
 *
 * It does not import test/helpers/anthropic.ts: that file pulls in src/, and a stand-in must not
 * depend on the code it judges. Its window is measured at 4 bytes a token.
 */

export const BINDING_BETA = 'thinking-binding-controls-2026-08-01';
const BYTES_PER_TOKEN = 4;
export const tokensOf = (bytes: number) => Math.ceil(bytes / BYTES_PER_TOKEN);

/** How the stand-in says "too long". */
export type StrictAnthropicReject =
  | 'prompt_too_long' // 400 "prompt is too long: N tokens > M maximum"
  | 'json_413' // 413 request_too_large, the API's envelope
  | 'edge_413' // 413 from an edge proxy, as HTML
  | 'sse_error' // 200 stream: message_start, ping, then event: error (a non-stream request gets the 400)
  | 'input_plus_max_tokens'; // 400 "input length and `max_tokens` exceed context limit: A + B > C", the prompt and max_tokens together over the window

export interface StrictAnthropicOptions {
  /** Bodies larger than this are over the window (limitBytes / 4 tokens). Default: no limit. */
  limitBytes?: number;
  /** How a body over limitBytes is refused; under input_plus_max_tokens, a prompt whose tokens plus
   * its max_tokens exceed the window (the prompt alone may fit). Default prompt_too_long. */
  style?: StrictAnthropicReject;
  /** Every answer starts with a signed thinking block (text '', as with display omitted), unless the
   * request sets thinking.type disabled. Default true. */
  thinking?: boolean;
  /** What the model says. Default: the text 'next step'. */
  reply?: (req: Received) => { text?: string; toolUse?: { id: string; name: string; input: unknown } };
  /** The model that serves and signs. Default: the one the request names. A fixed one that
   * differs from the request's plays a server-side fallback: its blocks fail the model check. */
  model?: string;
  /** A message's string `content` binds as the one text block it is shorthand for (the same value),
   * so a client that sends a message as blocks (to mark it with cache_control) and later as a
   * string keeps its thinking valid: Claude Code does so with its `role: "system"` entry on its
   * second turn, and the API cannot refuse that. Default true; false compares them as sent. */
  stringContentAsBlock?: boolean;
}

interface ThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature: string;
}

export interface BindingCheck {
  /** The error message it answered with (binding, window or size), if any. */
  refused: string | null;
  /** Paths (messages.i.content.j) of every block that failed the prefix check; a 400 names the first. */
  invalid: string[];
  /** Paths it dropped, under drop_block or for a model mismatch. */
  dropped: string[];
  /** The request opted in to drop_block, with the beta. */
  dropBlock: boolean;
}

export interface StrictAnthropic extends FakeUpstream {
  messageCalls(): Received[];
  summarizerCalls(): Received[];
  /** One per non-summarizer request, in order. */
  checks(): BindingCheck[];
  /** The thinking block returned to each answered non-summarizer request; call indexes messageCalls(). */
  issued(): Array<{ call: number; block: ThinkingBlock }>;
}

/** What a signature records of the block it signs. The prefix is hashed in three parts (canonical:
 * cache_control dropped, keys sorted) so that a refusal can say which part changed. */
interface Binding {
  model: string;
  system: string;
  tools: string;
  /** The messages before the block's position, thinking removed. */
  messages: string;
  /** The block's own thinking text. */
  text: string;
  /** The id of the thinking block right before it in the request it answered. */
  prev: string | null;
  id: string;
}

interface Located {
  i: number;
  j: number;
  path: string;
  block: any;
  binding: Binding;
}

type Transformation = { type: 'thinking_dropped'; path: string; reason: 'prefix_binding_mismatch' | 'model_binding_mismatch' };

const DROP_KEYS: ReadonlySet<string> = new Set(['cache_control']);
const isSummarizer = (r: Received) => r.headers['x-gateway-compaction'] === 'summarizer';
const isThinking = (b: any) => b?.type === 'thinking' || b?.type === 'redacted_thinking';

export interface StrictAnthropicRules {
  handle: Handler;
  checks(): BindingCheck[];
  issued(): Array<{ call: number; block: ThinkingBlock }>;
}

/** The Messages API's rules as a handler, for one server or a route of a shared one. */
export function strictAnthropicRules(options: StrictAnthropicOptions = {}): StrictAnthropicRules {
  const checks: BindingCheck[] = [];
  const issued: Array<{ call: number; block: ThinkingBlock }> = [];
  let answered = 0;
  let seen = 0;

  const handle: Handler = (req, res) => {
    const summarizer = isSummarizer(req);
    const check: BindingCheck = { refused: null, invalid: [], dropped: [], dropBlock: false };
    const call = summarizer ? -1 : seen++;
    if (!summarizer) checks.push(check);
    const admitted = admit(req, check, options);
    if (admitted instanceof Refusal) {
      check.refused = admitted.message;
      return admitted.write(res);
    }
    const { body, beta, located, dropped } = admitted;
    const model = options.model ?? String(body.model);
    const content: any[] = [];
    if (summarizer) {
      content.push({
        type: 'text',
        text: `SUMMARY of ${textOf(body.messages[0]?.content).length} chars: the user asked for a review of src/.`,
      });
    } else {
      if (options.thinking !== false && body.thinking?.type !== 'disabled') {
        const block = signedBlock(body, model, located.at(-1)?.binding.id ?? null);
        issued.push({ call, block });
        content.push(block);
      }
      const reply = options.reply?.(req) ?? {};
      if (reply.text !== undefined || !reply.toolUse) content.push({ type: 'text', text: reply.text ?? 'next step' });
      if (reply.toolUse) content.push({ type: 'tool_use', ...reply.toolUse });
    }
    const message = {
      id: `msg_strict_${++answered}`,
      type: 'message',
      role: 'assistant',
      model,
      content,
      stop_reason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: tokensOf(req.body.length), output_tokens: 5 },
      ...(beta ? { input_transformations: dropped } : {}),
    };
    if (body.stream === true) return writeEvents(res, streamOf(message));
    json(res, 200, message);
  };
  return { handle, checks: () => checks, issued: () => issued };
}

export async function startStrictAnthropic(options: StrictAnthropicOptions = {}): Promise<StrictAnthropic> {
  const rules = strictAnthropicRules(options);
  const upstream = await startFakeUpstream(rules.handle);
  return {
    ...upstream,
    messageCalls: () => upstream.received.filter((r) => !isSummarizer(r)),
    summarizerCalls: () => upstream.received.filter(isSummarizer),
    checks: rules.checks,
    issued: rules.issued,
  };
}

/** How the stand-in says no: the message (for checks()) and the bytes. */
class Refusal {
  constructor(
    readonly message: string,
    readonly write: (res: ServerResponse) => void,
  ) {}

  static json(status: number, type: string, message: string): Refusal {
    return new Refusal(message, (res) => json(res, status, { type: 'error', error: { type, message }, request_id: requestId() }));
  }

  static invalid(message: string): Refusal {
    return Refusal.json(400, 'invalid_request_error', message);
  }
}

interface Admitted {
  body: any;
  beta: boolean;
  located: Located[];
  dropped: Transformation[];
}

/** The API's checks, in its order: size, tool pairs, cache breakpoints, unknown fields, the open tool round, binding, window. */
function admit(req: Received, check: BindingCheck, options: StrictAnthropicOptions): Admitted | Refusal {
  const limitBytes = options.limitBytes ?? Infinity;
  const style = options.style ?? 'prompt_too_long';
  const over = req.body.length > limitBytes;
  // An edge answers before anything parses the body; the API's own 413 comes as early.
  if (over && style === 'edge_413') return new Refusal('413 Request Entity Too Large', edge413);
  if (over && style === 'json_413') return Refusal.json(413, 'request_too_large', 'Request exceeds the maximum allowed number of bytes.');
  const sent = req.json;
  if (sent === null || typeof sent !== 'object' || !Array.isArray(sent.messages)) return Refusal.invalid('messages: Field required');
  const body = options.stringContentAsBlock === false ? sent : withBlocks(sent);
  const unpaired = toolPairProblem(body.messages);
  if (unpaired) return Refusal.invalid(unpaired);
  const breakpoints = cacheBreakpoints(body);
  if (breakpoints > MAX_BREAKPOINTS)
    return Refusal.invalid(`A maximum of ${MAX_BREAKPOINTS} blocks with cache_control may be provided. Found ${breakpoints}.`);

  const beta = String(req.headers['anthropic-beta'] ?? '')
    .split(',')
    .map((s) => s.trim())
    .includes(BINDING_BETA);
  const thinking = body.thinking ?? {};
  if (thinking.block_binding !== undefined && !beta)
    return Refusal.invalid(`thinking.${thinking.type}.block_binding: Extra inputs are not permitted`);
  check.dropBlock = thinking.block_binding?.prefix_mismatch_behavior === 'drop_block';
  const unstarted = thinking.type === 'enabled' ? finalAssistantWithoutThinking(body.messages) : null;
  if (unstarted) return Refusal.invalid(unstarted);

  const located = locate(body.messages);
  if (typeof located === 'string') return Refusal.invalid(located);
  const verdict = judge(body, located, check.dropBlock);
  check.invalid = verdict.invalid;
  if (verdict.refusal) return Refusal.invalid(boundElsewhere(verdict.refusal, beta));
  check.dropped = verdict.dropped.map((t) => t.path);

  const prompt = tokensOf(req.body.length);
  const window = Math.floor(limitBytes / BYTES_PER_TOKEN);
  if (style === 'input_plus_max_tokens') {
    // A prompt over the window by itself is said to be too long, whatever max_tokens is.
    const maxTokens = Number(body.max_tokens ?? 0);
    if (prompt > window) return Refusal.invalid(promptTooLong(prompt, window).error.message);
    if (prompt + maxTokens > window) return Refusal.invalid(inputPlusMaxTokens(prompt, maxTokens, window));
  } else if (over) return tooLong(style, body, prompt, window);
  return { body, beta, located, dropped: verdict.dropped };
}

// ---------------------------------------------------------------------------------------------
// The binding

function withBlocks(body: any): any {
  return {
    ...body,
    messages: body.messages.map((m: any) => (typeof m?.content === 'string' ? { ...m, content: [{ type: 'text', text: m.content }] } : m)),
  };
}

/** The canonical messages before position (i, j): thinking removed, and message i cut at j. */
function messagesBefore(messages: any[], i: number, j: number): unknown {
  const strip = (content: unknown) => (Array.isArray(content) ? content.filter((b) => !isThinking(b)) : content);
  const partial = messages[i];
  const cut = Array.isArray(partial?.content) ? partial.content.slice(0, j) : [];
  return [
    ...messages.slice(0, i).map((m) => ({ ...m, content: strip(m.content) })),
    { role: partial?.role ?? 'assistant', content: strip(cut) },
  ];
}

function bindingAt(body: any, i: number, j: number, model: string, text: string, prev: string | null, id: string): Binding {
  return {
    model,
    system: digest(body.system, DROP_KEYS),
    tools: digest(body.tools, DROP_KEYS),
    messages: digest(messagesBefore(body.messages, i, j), DROP_KEYS),
    text: digest(text),
    prev,
    id,
  };
}

/** The block the client will append at messages[n].content[0]; it follows the request's last thinking block. */
function signedBlock(body: any, model: string, prev: string | null): ThinkingBlock {
  const id = `th_${randomBytes(6).toString('hex')}`;
  return { type: 'thinking', thinking: '', signature: seal(bindingAt(body, body.messages.length, 0, model, '', prev, id)) };
}

/** Every thinking block with what its signature records, or the bare 400 for one that is not ours. */
function locate(messages: any[]): Located[] | string {
  const located: Located[] = [];
  for (const [i, m] of messages.entries()) {
    for (const [j, block] of (Array.isArray(m?.content) ? m.content : []).entries()) {
      if (!isThinking(block)) continue;
      const path = `messages.${i}.content.${j}`;
      const binding = unseal<Binding>(block.type === 'thinking' ? block.signature : block.data);
      const textIntact = block.type !== 'thinking' || binding?.text === digest(String(block.thinking ?? ''));
      if (!binding || !textIntact) return `${path}: Invalid \`signature\` in \`${block.type}\` block`;
      located.push({ i, j, path, block, binding });
    }
  }
  return located;
}

const CHANGED = {
  system: 'The `system` prompt differs from when the block was created.',
  tools: 'The `tools` list differs from when the block was created.',
  content: 'Content before this block differs from when it was created.',
  missing: 'A thinking block that preceded this block when it was created is missing from this request.',
  added: 'A thinking block before this block was not there when it was created.',
};

/** Why a block fails the prefix check, or null. The first block sent may have lost its predecessors. */
function prefixMismatch(body: any, located: Located[], k: number): string | null {
  const { binding, i, j } = located[k];
  if (binding.system !== digest(body.system, DROP_KEYS)) return CHANGED.system;
  if (binding.tools !== digest(body.tools, DROP_KEYS)) return CHANGED.tools;
  if (binding.messages !== digest(messagesBefore(body.messages, i, j), DROP_KEYS)) return CHANGED.content;
  if (k === 0 || binding.prev === located[k - 1].binding.id) return null;
  const sentEarlier = located.slice(0, k).some((l) => l.binding.id === binding.prev);
  return binding.prev !== null && !sentEarlier ? CHANGED.missing : CHANGED.added;
}

interface Verdict {
  invalid: string[];
  /** The first failing block when the request did not opt in to drop_block. */
  refusal?: { path: string; type: string; reason: string };
  dropped: Transformation[];
}

/**
 * Model check first (a block from another model is dropped whatever the request says), then the
 * prefix check on every other block. drop_block drops the first failing block and every thinking
 * block after it; without it the first failing block is a 400.
 */
function judge(body: any, located: Located[], dropBlock: boolean): Verdict {
  const reasons = located.map((l, k) => (l.binding.model !== body.model ? 'model' : prefixMismatch(body, located, k)));
  const invalid = located.filter((_, k) => reasons[k] !== null && reasons[k] !== 'model').map((l) => l.path);
  const first = reasons.findIndex((r) => r !== null && r !== 'model');
  if (first >= 0 && !dropBlock)
    return { invalid, dropped: [], refusal: { path: located[first].path, type: located[first].block.type, reason: reasons[first]! } };
  const dropped = located.flatMap((l, k): Transformation[] => {
    if (reasons[k] === 'model') return [{ type: 'thinking_dropped', path: l.path, reason: 'model_binding_mismatch' }];
    return first >= 0 && k >= first ? [{ type: 'thinking_dropped', path: l.path, reason: 'prefix_binding_mismatch' }] : [];
  });
  return { invalid, dropped };
}

function boundElsewhere(refusal: { path: string; type: string; reason: string }, beta: boolean): string {
  const sentences = [
    `${refusal.path}: Invalid \`signature\` in \`${refusal.type}\` block.`,
    'The block is bound to a different conversation.',
    'Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".',
  ];
  if (!beta) sentences.push(`That setting requires the \`${BINDING_BETA}\` value in the \`anthropic-beta\` header.`);
  return [...sentences, refusal.reason].join(' ');
}

/** The API takes at most four cache breakpoints a request, wherever they are. */
const MAX_BREAKPOINTS = 4;

/** The blocks marked with cache_control across tools, system and messages (a tool_result's own content too). */
function cacheBreakpoints(body: any): number {
  let found = 0;
  const count = (blocks: unknown): void => {
    if (!Array.isArray(blocks)) return;
    for (const block of blocks) {
      if (block === null || typeof block !== 'object') continue;
      if (block.cache_control != null) found++;
      count(block.content);
    }
  };
  count(body.tools);
  count(body.system);
  for (const m of body.messages) count(m?.content);
  return found;
}

/**
 * Tool pairs, in the API's words: every tool_use answered by a tool_result in the very next
 * message, every tool_result answering a tool_use of the message just before it.
 */
function toolPairProblem(messages: any[]): string | null {
  const blocks = (m: any): any[] => (Array.isArray(m?.content) ? m.content : []);
  for (const [i, m] of messages.entries()) {
    if (m?.role === 'user') {
      const previous = messages[i - 1];
      const issued = new Set(
        previous?.role === 'assistant'
          ? blocks(previous)
              .filter((b) => b?.type === 'tool_use')
              .map((b) => b.id)
          : [],
      );
      for (const [j, b] of blocks(m).entries()) {
        if (b?.type === 'tool_result' && !issued.has(b.tool_use_id)) {
          return `messages.${i}.content.${j}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${b.tool_use_id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
        }
      }
    }
    if (m?.role === 'assistant') {
      const next = messages[i + 1];
      const answered = new Set(
        next?.role === 'user'
          ? blocks(next)
              .filter((b) => b?.type === 'tool_result')
              .map((b) => b.tool_use_id)
          : [],
      );
      const missing = blocks(m)
        .filter((b) => b?.type === 'tool_use' && !answered.has(b.id))
        .map((b) => b.id);
      if (missing.length > 0) {
        return `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`;
      }
    }
  }
  return null;
}

/** With thinking enabled, an open tool round's assistant message must start with its thinking. */
function finalAssistantWithoutThinking(messages: any[]): string | null {
  const last = messages.at(-1);
  const assistant = messages.at(-2);
  if (last?.role !== 'user' || assistant?.role !== 'assistant' || !Array.isArray(last.content)) return null;
  const uses = new Set(
    (Array.isArray(assistant.content) ? assistant.content : []).filter((b: any) => b?.type === 'tool_use').map((b: any) => b.id),
  );
  if (!last.content.some((b: any) => b?.type === 'tool_result' && uses.has(b.tool_use_id))) return null;
  const first = Array.isArray(assistant.content) ? assistant.content[0]?.type : 'text';
  if (isThinking({ type: first })) return null;
  return `messages.${messages.length - 2}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${first}\`. When thinking is enabled, a final assistant message must start with a thinking block.`;
}

// ---------------------------------------------------------------------------------------------
// Wire shapes

const requestId = () => `req_${randomBytes(12).toString('hex')}`;

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  return (Array.isArray(content) ? content : []).map((b: any) => (typeof b?.text === 'string' ? b.text : '')).join('');
}

function promptTooLong(prompt: number, window: number) {
  return { type: 'error', error: { type: 'invalid_request_error', message: `prompt is too long: ${prompt} tokens > ${window} maximum` } };
}

function inputPlusMaxTokens(prompt: number, maxTokens: number, window: number): string {
  return `input length and \`max_tokens\` exceed context limit: ${prompt} + ${maxTokens} > ${window}, decrease input length or \`max_tokens\` and try again`;
}

function tooLong(style: StrictAnthropicReject, body: any, prompt: number, window: number): Refusal {
  const refusal = promptTooLong(prompt, window);
  if (style !== 'sse_error' || body.stream !== true) return Refusal.invalid(refusal.error.message);
  // The API has already said 200: the overflow arrives as an error event after message_start.
  const started = {
    id: 'msg_strict_overflow',
    type: 'message',
    role: 'assistant',
    model: body.model,
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: { input_tokens: prompt, output_tokens: 1 },
  };
  return new Refusal(refusal.error.message, (res) =>
    writeEvents(res, [event('message_start', { message: started }), event('ping', {}), event('error', refusal)]),
  );
}

function edge413(res: ServerResponse): void {
  res.writeHead(413, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_413) });
  res.end(NGINX_413);
}

export function event(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

/** The events of a streamed answer, in the API's order; input_transformations rides on message_start. */
function streamOf(message: { content: any[]; stop_reason: string; usage: { output_tokens: number } } & Record<string, unknown>): string[] {
  const events = [
    event('message_start', { message: { ...message, content: [], stop_reason: null, usage: { ...message.usage, output_tokens: 1 } } }),
  ];
  message.content.forEach((block, index) => {
    const [start, delta] = blockEvents(block);
    events.push(
      event('content_block_start', { index, content_block: start }),
      event('content_block_delta', { index, delta }),
      event('content_block_stop', { index }),
    );
  });
  events.push(
    event('message_delta', {
      delta: { stop_reason: message.stop_reason, stop_sequence: null },
      usage: { output_tokens: message.usage.output_tokens },
    }),
  );
  events.push(event('message_stop', {}));
  return events;
}

function blockEvents(block: any): [unknown, unknown] {
  switch (block.type) {
    case 'thinking':
      return [
        { type: 'thinking', thinking: '', signature: '' },
        { type: 'signature_delta', signature: block.signature },
      ];
    case 'tool_use':
      return [
        { ...block, input: {} },
        { type: 'input_json_delta', partial_json: JSON.stringify(block.input) },
      ];
    default:
      return [
        { type: 'text', text: '' },
        { type: 'text_delta', text: block.text },
      ];
  }
}

function writeEvents(res: ServerResponse, events: string[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  // One write per event, as the API flushes them.
  for (const e of events) res.write(e);
  res.end();
}
