import fc from 'fast-check';
import type { ChatMessage, ToolCall } from '../../src/dialects/chat.js';

/*
 * Builders of realistic agent conversations, shared by the compaction tests, flow tests and the
 * benchmark. Everything is derived from a seed, so the same options give the same messages.
 */

// ---------------------------------------------------------------------------------------------
// Seeded randomness (mulberry32): tiny, fast, and stable across Node versions.

export interface Rng {
  next(): number;
  int(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
}

export function rng(seed: number): Rng {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    pick: (items) => items[Math.floor(next() * items.length)],
  };
}

// ---------------------------------------------------------------------------------------------
// Text

const WORDS = [
  'const',
  'value',
  'return',
  'await',
  'request',
  'response',
  'handler',
  'config',
  'error',
  'retry',
  'stream',
  'buffer',
  'tokens',
  'limit',
  'upstream',
  'payload',
  'schema',
  'index',
  'result',
  'ok',
  'café',
  'naïve',
  '日本語',
  '✓',
  '→',
  '"quoted"',
  'tab\there',
  'C:\\path',
  '🚀',
  'résumé',
];
const FILES = [
  'src/server.ts',
  'src/routes/chat.ts',
  'src/upstream/client.ts',
  'test/flows/replay.test.ts',
  'package.json',
  'README.md',
  'src/config/schema.ts',
  'src/compaction/plan.ts',
  'docs/limits.md',
];
const TOOLS = ['read_file', 'bash', 'grep', 'write_file', 'list_dir', 'run_tests'];

/** About `chars` characters of log-like text: lines of words, a few non-ASCII and escapes. */
export function loremText(r: Rng, chars: number): string {
  const lines: string[] = [];
  let length = 0;
  while (length < chars) {
    const words: string[] = [`${r.pick(FILES)}:${r.int(1, 999)}:`];
    for (let w = r.int(4, 14); w > 0; w--) words.push(r.pick(WORDS));
    const line = words.join(' ');
    lines.push(line);
    length += line.length + 1;
  }
  return lines.join('\n').slice(0, chars);
}

/** A base64 data URL of `bytes` pseudo-random bytes, the way clients inline screenshots. */
function dataUrlImage(r: Rng, bytes: number): string {
  const raw = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) raw[i] = r.int(0, 255);
  return `data:image/png;base64,${raw.toString('base64')}`;
}

// ---------------------------------------------------------------------------------------------
// Small builders for hand-written cases

export const system = (content: string): ChatMessage => ({ role: 'system', content });
export const user = (content: unknown, extra: Record<string, unknown> = {}): ChatMessage => ({ role: 'user', content, ...extra });
export const say = (content: string): ChatMessage => ({ role: 'assistant', content });

/** An assistant message calling `ids` (content null), the way OpenAI returns tool calls. */
export function calls(...ids: string[]): ChatMessage {
  return {
    role: 'assistant',
    content: null,
    tool_calls: ids.map((id) => ({ id, type: 'function', function: { name: 'read_file', arguments: `{"path":"src/${id}.ts"}` } })),
  };
}

export const result = (id: string, content: unknown = `output of ${id}`): ChatMessage => ({ role: 'tool', tool_call_id: id, content });

/** An OpenAI image part carrying `bytes` of base64 data. */
export const imagePart = (bytes: number): unknown => ({
  type: 'image_url',
  image_url: { url: `data:image/png;base64,${'A'.repeat(bytes)}` },
});

// ---------------------------------------------------------------------------------------------
// Agent conversations

export interface AgentConversationOptions {
  /** Assistant tool-call rounds. */
  turns: number;
  /** Typical size of one tool result (each varies between 25% and 175% of it). */
  toolOutputBytes: number;
  seed: number;
  /** Size of the screenshot inlined in the user's task (0 for none). Default 3,000. */
  imageBytes?: number;
  /** A user follow-up about every N rounds. Default 12. */
  followUpEvery?: number;
  /** Also start with a developer message after the system prompt. Default false. */
  developer?: boolean;
  /** 'tool' (an agent loop waiting for the model) or 'user' (a fresh question). Default 'tool'. */
  endWith?: 'tool' | 'user';
}

/**
 * system prompt, a user task (text + image parts), then rounds of assistant tool_calls (content
 * null, 1-3 calls) each followed by its tool results, with occasional user follow-ups.
 * Includes `name` fields, parts arrays and unknown extra fields, as real clients send them.
 */
export function agentConversation(options: AgentConversationOptions): ChatMessage[] {
  const r = rng(options.seed);
  const messages: ChatMessage[] = [{ role: 'system', content: `You are a coding agent.\n${loremText(r, 1500)}` }];
  if (options.developer) messages.push({ role: 'developer', content: 'Prefer small diffs. Run the tests.' });
  messages.push(userTask(r, options.imageBytes ?? 3000));
  const followUpEvery = options.followUpEvery ?? 12;
  for (let turn = 1; turn <= options.turns; turn++) {
    messages.push(...toolRound(r, options, turn));
    if (turn % followUpEvery === 0 && turn < options.turns) messages.push(...followUp(r, turn));
  }
  if (options.endWith === 'user') messages.push(...followUp(r, options.turns + 1));
  return messages;
}

function userTask(r: Rng, imageBytes: number): ChatMessage {
  const parts: unknown[] = [{ type: 'text', text: `Fix the failing replay test.\n${loremText(r, 400)}` }];
  if (imageBytes > 0) parts.push({ type: 'image_url', image_url: { url: dataUrlImage(r, imageBytes), detail: 'low' } });
  return { role: 'user', name: 'alice', content: parts };
}

function toolRound(r: Rng, options: AgentConversationOptions, turn: number): ChatMessage[] {
  const calls: ToolCall[] = [];
  for (let c = r.int(1, 3); c > 0; c--) calls.push(toolCall(r, options.seed, turn, calls.length));
  const assistant: ChatMessage = { role: 'assistant', content: null, tool_calls: calls };
  if (turn % 5 === 0) assistant.reasoning_content = `Round ${turn}: ${loremText(r, 200)}`;
  if (turn % 7 === 0) assistant.content = 'Let me look at a few more files.';
  return [assistant, ...calls.map((call) => toolResult(r, call, options.toolOutputBytes))];
}

function toolCall(r: Rng, seed: number, turn: number, n: number): ToolCall {
  const name = r.pick(TOOLS);
  const args = name === 'bash' ? { command: `npm test -- ${r.pick(FILES)}` } : { path: r.pick(FILES), max_lines: 400 };
  return { id: `call_${seed}_${turn}_${n}`, type: 'function', function: { name, arguments: JSON.stringify(args) } };
}

function toolResult(r: Rng, call: ToolCall, typicalBytes: number): ChatMessage {
  const text = loremText(r, Math.round(typicalBytes * (0.25 + 1.5 * r.next())));
  const content = r.next() < 0.15 ? [{ type: 'text', text }] : text;
  return { role: 'tool', tool_call_id: call.id, name: call.function?.name, content, x_latency_ms: r.int(5, 900) };
}

function followUp(r: Rng, turn: number): ChatMessage[] {
  return [
    { role: 'assistant', content: `Progress after round ${turn}: ${loremText(r, 300)}` },
    { role: 'user', name: 'alice', content: `Follow-up ${turn}: also check ${r.pick(FILES)}.\n${loremText(r, 200)}` },
  ];
}

/** About 7 MB and 2,000 messages, one 200 KB screenshot: the size of a real overlong request. */
export function bigAgentConversation(seed = 7): ChatMessage[] {
  return agentConversation({ turns: 620, toolOutputBytes: 4800, seed, imageBytes: 200_000 });
}

// ---------------------------------------------------------------------------------------------
// fast-check: random valid conversations, described first, then built.

type Step = { kind: 'user'; chars: number; image: boolean } | { kind: 'text'; chars: number } | { kind: 'tools'; outputs: number[] };

const charsArb = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 400 }) },
  { weight: 3, arbitrary: fc.integer({ min: 400, max: 5000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 5000, max: 60_000 }) },
);

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('user' as const), chars: charsArb, image: fc.boolean() }),
  fc.record({ kind: fc.constant('text' as const), chars: charsArb }),
  fc.record({ kind: fc.constant('tools' as const), outputs: fc.array(charsArb, { minLength: 1, maxLength: 3 }) }),
);

const shapeArb = fc.record({
  systems: fc.integer({ min: 0, max: 3 }),
  first: charsArb,
  steps: fc.array(stepArb, { minLength: 0, maxLength: 30 }),
  seed: fc.integer({ min: 1, max: 1_000_000 }),
  /** Responses only: a reasoning item before an assistant turn, and parallel calls sent as calls-then-results. */
  reasoning: fc.boolean(),
});

/** Valid chat conversations: system messages, a first user message, then random steps. */
export const conversationArb: fc.Arbitrary<ChatMessage[]> = shapeArb.map(({ systems, first, steps, seed }) =>
  buildConversation(systems, first, steps, seed),
);

/** The same shapes as Responses API input items: function_call / function_call_output, reasoning. */
export const responsesConversationArb: fc.Arbitrary<ResponsesItem[]> = shapeArb.map(({ systems, first, steps, seed, reasoning }) =>
  buildResponsesConversation(systems, first, steps, seed, reasoning),
);

function buildConversation(systems: number, first: number, steps: Step[], seed: number): ChatMessage[] {
  const r = rng(seed);
  const messages: ChatMessage[] = [];
  for (let i = 0; i < systems; i++) messages.push({ role: i % 2 ? 'developer' : 'system', content: loremText(r, 200) });
  messages.push({ role: 'user', content: loremText(r, first) });
  steps.forEach((step, s) => messages.push(...buildStep(r, step, s)));
  return messages;
}

function buildStep(r: Rng, step: Step, s: number): ChatMessage[] {
  if (step.kind === 'text') return [{ role: 'assistant', content: loremText(r, step.chars) }];
  if (step.kind === 'user') {
    const text = loremText(r, step.chars);
    if (!step.image) return [{ role: 'user', content: text }];
    const image = { type: 'image_url', image_url: { url: dataUrlImage(r, 2000) } };
    return [{ role: 'user', content: [{ type: 'text', text }, image] }];
  }
  const calls = step.outputs.map((_, c) => ({
    id: `call_${s}_${c}`,
    type: 'function',
    function: { name: r.pick(TOOLS), arguments: JSON.stringify({ path: r.pick(FILES) }) },
  }));
  const results = calls.map((call, c) => ({ role: 'tool', tool_call_id: call.id, content: loremText(r, step.outputs[c]) }));
  return [{ role: 'assistant', content: null, tool_calls: calls }, ...results];
}

// ---------------------------------------------------------------------------------------------
// The Responses API (input items)

export type ResponsesItem = Record<string, unknown>;

const inputText = (role: string, text: string) => ({ type: role === 'assistant' ? 'output_text' : 'input_text', text });

export const rSystem = (text: string): ResponsesItem => ({ type: 'message', role: 'developer', content: [inputText('developer', text)] });
export const rUser = (content: string | unknown[]): ResponsesItem => ({
  type: 'message',
  role: 'user',
  content: typeof content === 'string' ? [inputText('user', content)] : content,
});
export const rSay = (text: string): ResponsesItem => ({ type: 'message', role: 'assistant', content: [inputText('assistant', text)] });
/** A function_call item; its `id` is the item's, `call_id` what the output answers. */
export const rCall = (id: string, name = 'read_file'): ResponsesItem => ({
  type: 'function_call',
  id: `fc_${id}`,
  call_id: id,
  name,
  arguments: JSON.stringify({ path: `src/${id}.ts` }),
});
export const rOutput = (id: string, output: unknown = `output of ${id}`): ResponsesItem => ({
  type: 'function_call_output',
  call_id: id,
  output,
});
/** An encrypted reasoning item: opaque, and it belongs to the item after it. */
export const rReasoning = (id: string): ResponsesItem => ({
  type: 'reasoning',
  id: `rs_${id}`,
  summary: [],
  encrypted_content: `gAAAAB${'e'.repeat(300)}`,
});
/** A Responses inline image part of `bytes` base64 characters. */
export const rImagePart = (bytes: number): unknown => ({ type: 'input_image', image_url: `data:image/png;base64,${'A'.repeat(bytes)}` });

function buildResponsesConversation(systems: number, first: number, steps: Step[], seed: number, reasoning: boolean): ResponsesItem[] {
  const r = rng(seed);
  const items: ResponsesItem[] = [];
  for (let i = 0; i < systems; i++) items.push(rSystem(loremText(r, 200)));
  items.push(rUser(loremText(r, first)));
  steps.forEach((step, s) => items.push(...buildResponsesStep(r, step, s, reasoning)));
  return items;
}

function buildResponsesStep(r: Rng, step: Step, s: number, reasoning: boolean): ResponsesItem[] {
  const thought = reasoning && r.next() < 0.6 ? [rReasoning(`${s}`)] : [];
  if (step.kind === 'text') return [...thought, rSay(loremText(r, step.chars))];
  if (step.kind === 'user') {
    const text = loremText(r, step.chars);
    if (!step.image) return [rUser(text)];
    return [rUser([inputText('user', text), { type: 'input_image', image_url: dataUrlImage(r, 2000) }])];
  }
  const ids = step.outputs.map((_, c) => `call_${s}_${c}`);
  const calls = ids.map((id) => ({ ...rCall(id, r.pick(TOOLS)), arguments: JSON.stringify({ path: r.pick(FILES) }) }));
  const outputs = ids.map((id, c) => {
    const text = loremText(r, step.outputs[c]);
    return rOutput(id, r.next() < 0.3 ? [inputText('user', text)] : text);
  });
  // Parallel calls come as every call item, then every output (what Codex sends).
  return [...thought, ...calls, ...outputs];
}

// ---------------------------------------------------------------------------------------------

/** Freezes a value and everything reachable from it, so a mutation throws in strict mode. */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  for (const child of Object.values(value)) deepFreeze(child);
  return Object.freeze(value);
}
