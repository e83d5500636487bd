import type { ServerResponse } from 'node:http';
import { expect } from 'vitest';
import { messages as dialect } from '../../src/dialects/messages.js';
import { json, startFakeUpstream, type FakeUpstream, type Received } from './fake-upstream.js';
import { NGINX_413 } from './provider.js';

/*
 * A fake Anthropic Messages API on a loopback port: a context window measured at 4 bytes a token,
 * the rejections Anthropic (and its edge) send, answers and streams in the API's own shape, and
 * the summarizer's answers (calls marked x-gateway-compaction: summarizer).
 */

/** How the fake says "too long". */
export type AnthropicReject =
  | 'prompt_too_long' // 400 invalid_request_error "prompt is too long: N tokens > M maximum"
  | 'input_plus_max_tokens' // 400 "input length and `max_tokens` exceed context limit: A + B > C"
  | 'json_413' // 413 request_too_large, Anthropic's envelope
  | 'edge_413' // 413 from an edge proxy, as HTML
  | 'sse_error'; // 200 stream: message_start, ping, then event: error (non-stream requests get the 400)

export interface AnthropicOptions {
  /** Bodies larger than this are over the window (the window is limitBytes / 4 tokens). */
  limitBytes: number;
  style: AnthropicReject;
  answer?: string;
}

export interface FakeAnthropic extends FakeUpstream {
  messageCalls(): Received[];
  summarizerCalls(): Received[];
}

export const BYTES_PER_TOKEN = 4;
export const tokensOf = (bytes: number) => Math.ceil(bytes / BYTES_PER_TOKEN);

export async function startAnthropic(options: AnthropicOptions): Promise<FakeAnthropic> {
  const upstream = await startFakeUpstream(async (req, res) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer') return summarizerAnswer(req, res);
    const window = Math.floor(options.limitBytes / BYTES_PER_TOKEN);
    const prompt = tokensOf(req.body.length);
    if (options.style === 'input_plus_max_tokens') {
      const maxTokens = Number(req.json?.max_tokens ?? 0);
      if (prompt + maxTokens > window) return reject(res, options.style, prompt, window, maxTokens, req.json?.stream);
    } else if (req.body.length > options.limitBytes) {
      return reject(res, options.style, prompt, window, 0, req.json?.stream);
    }
    const text = options.answer ?? 'rescued answer';
    if (req.json?.stream) return messageStream(res, message(text, prompt));
    return json(res, 200, message(text, prompt));
  });
  return {
    ...upstream,
    messageCalls: () => upstream.received.filter((r) => r.headers['x-gateway-compaction'] !== 'summarizer'),
    summarizerCalls: () => upstream.received.filter((r) => r.headers['x-gateway-compaction'] === 'summarizer'),
  };
}

export function message(text: string, inputTokens: number, id = 'msg_fake_1') {
  return {
    id,
    type: 'message',
    role: 'assistant',
    model: 'claude-test',
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: inputTokens, output_tokens: 3 },
  };
}

export function event(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

/** The events of a streamed message, in the API's order. */
export function streamOf(m: ReturnType<typeof message>): string[] {
  const text = m.content[0].text;
  return [
    event('message_start', { message: { ...m, content: [], stop_reason: null, usage: { ...m.usage, output_tokens: 1 } } }),
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    event('ping', {}),
    event('content_block_delta', { index: 0, delta: { type: 'text_delta', text } }),
    event('content_block_stop', { index: 0 }),
    event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 3 } }),
    event('message_stop', {}),
  ];
}

function messageStream(res: ServerResponse, m: ReturnType<typeof message>): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  // One write per event, as the API flushes them.
  for (const e of streamOf(m)) res.write(e);
  res.end();
}

export function promptTooLong(prompt: number, window: number) {
  return { type: 'error', error: { type: 'invalid_request_error', message: `prompt is too long: ${prompt} tokens > ${window} maximum` } };
}

function reject(res: ServerResponse, style: AnthropicReject, prompt: number, window: number, maxTokens: number, stream: unknown): void {
  switch (style) {
    case 'prompt_too_long':
      return json(res, 400, { ...promptTooLong(prompt, window), request_id: 'req_fake' });
    case 'input_plus_max_tokens': {
      const message = `input length and \`max_tokens\` exceed context limit: ${prompt} + ${maxTokens} > ${window}, decrease input length or \`max_tokens\` and try again`;
      return json(res, 400, { type: 'error', error: { type: 'invalid_request_error', message } });
    }
    case 'json_413':
      return json(res, 413, { type: 'error', error: { type: 'request_too_large', message: 'Request exceeds the maximum allowed number of bytes.' } });
    case 'edge_413':
      res.writeHead(413, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_413) });
      res.end(NGINX_413);
      return;
    case 'sse_error':
      if (!stream) return json(res, 400, promptTooLong(prompt, window));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(streamOf(message('', prompt))[0]);
      res.write(event('ping', {}));
      res.end(`event: error\ndata: ${JSON.stringify(promptTooLong(prompt, window))}\n\n`);
      return;
  }
}

function summarizerAnswer(req: Received, res: ServerResponse): void {
  const transcript = String(req.json?.messages?.[0]?.content ?? '');
  json(res, 200, message(`SUMMARY of ${transcript.length} chars: the user asked for a review of src/.`, tokensOf(req.body.length), 'msg_summary'));
}

// ---------------------------------------------------------------------------------------------
// What a valid replay of a Messages request looks like

/** cache_control breakpoints in a whole request: system, tools and messages. */
export function countBreakpoints(body: any): number {
  const marked = (b: any) => (b && typeof b === 'object' && b.cache_control != null ? 1 : 0);
  let n = 0;
  for (const b of Array.isArray(body.system) ? body.system : []) n += marked(b);
  for (const t of body.tools ?? []) n += marked(t);
  for (const m of body.messages ?? []) {
    for (const b of Array.isArray(m.content) ? m.content : []) {
      n += marked(b);
      for (const inner of Array.isArray(b?.content) ? b.content : []) n += marked(inner);
    }
  }
  return n;
}

/** What the API checks of any messages list: turns alternate from a user turn; every tool_result
 * sits first in the message right after its tool_use, and every tool_use is answered there. */
export function expectWellFormed(sent: any[]): void {
  const turns = sent.filter((m) => m.role !== 'system');
  expect(turns[0].role, 'the first turn').toBe('user');
  turns.forEach((m, i) => i > 0 && expect(m.role, `turn ${i}`).not.toBe(turns[i - 1].role));
  sent.forEach((m, i) => {
    const blocks = Array.isArray(m.content) ? m.content : [];
    const results = blocks.filter((b: any) => b.type === 'tool_result');
    expect(blocks.slice(0, results.length), `tool results first in message ${i}`).toEqual(results);
    const issued = (sent[i - 1]?.role === 'assistant' ? sent[i - 1].content : []).filter((b: any) => b.type === 'tool_use').map((b: any) => b.id);
    for (const r of results) expect(issued, `the tool_use before the tool_result in message ${i}`).toContain(r.tool_use_id);
    if (m.role === 'assistant' && i + 1 < sent.length) {
      const answered = (Array.isArray(sent[i + 1].content) ? sent[i + 1].content : []).map((b: any) => b.tool_use_id);
      for (const use of blocks.filter((b: any) => b.type === 'tool_use')) expect(answered, `the answer to ${use.id}`).toContain(use.id);
    }
  });
}

/**
 * Checks a replayed Messages request against the rejected one, independently of the dialect's
 * own problems(): well formed, no more breakpoints, every non-message field as sent, and signed
 * thinking as the binding allows after a first compaction: every assistant message is one of the
 * original's with its thinking blocks removed, except the open tool round's under thinking
 * `enabled`, which is sent whole with `drop_block` (the beta appended to the caller's).
 */
export function expectValidMessagesReplay(rejected: Received, replay: Received): void {
  const original = rejected.json.messages as any[];
  const sent = replay.json.messages as any[];
  expectWellFormed(sent);
  expect(countBreakpoints(replay.json)).toBeLessThanOrEqual(countBreakpoints(rejected.json));
  const isThinking = (b: any) => b.type === 'thinking' || b.type === 'redacted_thinking';
  const thinking = (m: any) => Array.isArray(m.content) && m.content.some(isThinking);
  const unsigned = (m: any) => JSON.stringify({ ...m, content: m.content.filter((b: any) => !isThinking(b)) });
  const strippedOriginals = new Set(original.filter((m) => m.role === 'assistant' && Array.isArray(m.content)).map(unsigned));
  const openRound = original.length >= 2 && original.at(-2).role === 'assistant' ? original.at(-2) : undefined;
  // Before the first changed message (masking changes none of the opening) every block is bound to
  // what it was made after, byte for byte: it may stay. After it, only the open round's.
  const firstChange = sent.findIndex((m, i) => JSON.stringify(m) !== JSON.stringify(original[i]));
  const unchanged = (i: number) => firstChange === -1 || i < firstChange;
  sent.forEach((m, i) => {
    if (m.role !== 'assistant' || unchanged(i)) return;
    if (!thinking(m)) expect(strippedOriginals.has(unsigned(m)), 'an original assistant message, its thinking stripped').toBe(true);
    else expect(JSON.stringify(m), 'thinking after the first change only in the open round, kept whole').toBe(JSON.stringify(openRound));
  });
  if (sent.some(thinking)) expect(rejected.json.thinking?.type, 'thinking kept only when it is enabled').toBe('enabled');
  const kept = sent.some((m, i) => !unchanged(i) && thinking(m));
  const { block_binding: binding, ...thinkingAfter } = replay.json.thinking ?? {};
  const { block_binding: own, ...thinkingBefore } = rejected.json.thinking ?? {};
  expect(thinkingAfter).toEqual(thinkingBefore);
  expect(binding, 'drop_block where a stale block is kept, else the caller\'s own').toEqual(kept && own === undefined ? { prefix_mismatch_behavior: 'drop_block' } : own);
  if (kept && own === undefined) expect(String(replay.headers['anthropic-beta'])).toContain('thinking-binding-controls-2026-08-01');
  const { messages: _a, thinking: _t1, ...fieldsBefore } = rejected.json;
  const { messages: _b, thinking: _t2, ...fieldsAfter } = replay.json;
  expect(fieldsAfter).toEqual(fieldsBefore);
  expect(Object.keys(replay.json)).toEqual(Object.keys(rejected.json));
  expect(dialect.problems(sent)).toEqual([]);
}

/** The summary the gateway put in a replay: always inside a user turn. */
export function summaryTurn(body: any): any {
  const holds = (m: any) => JSON.stringify(m.content).includes('[compaction-gateway]');
  return (body.messages as any[]).find(holds);
}
