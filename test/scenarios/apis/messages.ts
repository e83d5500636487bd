import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'vitest';
import { messages as dialect } from '../../../src/dialects/messages.js';
import type { Received } from '../../helpers/fake-upstream.js';
import { event } from '../../helpers/strict-anthropic.js';
import { CONTENT_TEXT, fileText, headerOf, QUESTION, REMARK, TASK, type ApiFixture, type Body, type Turn } from './fixture.js';

/* Anthropic Messages, as Claude Code sends them: system and tools marked for caching, every block of every answer sent back. */

const API_KEY = 'sk-ant-agent';
const CC = { type: 'ephemeral' } as const;

function request(turns: number): Body {
  const messages: any[] = [{ role: 'user', content: [{ type: 'text', text: TASK }] }];
  for (let t = 1; t <= turns; t++) {
    messages.push({
      role: 'assistant',
      content: [
        { type: 'text', text: `Reading src/module${t}.ts.` },
        { type: 'tool_use', id: `toolu_${t}`, name: 'Read', input: { file_path: `src/module${t}.ts` } },
      ],
    });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${t}`, content: fileText(t) }] });
  }
  messages.push(
    { role: 'assistant', content: [{ type: 'text', text: REMARK }] },
    { role: 'user', content: [{ type: 'text', text: QUESTION, cache_control: CC }] },
  );
  return {
    model: 'claude-test',
    max_tokens: 4_000,
    system: [{ type: 'text', text: 'You are a coding agent.', cache_control: CC }],
    tools: [
      {
        name: 'Read',
        description: 'Read a file',
        input_schema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] },
        cache_control: CC,
      },
    ],
    messages,
    metadata: { user_id: 'agent-7' },
    temperature: 0.2,
    future_field: { kept: ['as', 'sent'] },
  };
}

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
    const issued = (sent[i - 1]?.role === 'assistant' ? sent[i - 1].content : [])
      .filter((b: any) => b.type === 'tool_use')
      .map((b: any) => b.id);
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
  expect(binding, "drop_block where a stale block is kept, else the caller's own").toEqual(
    kept && own === undefined ? { prefix_mismatch_behavior: 'drop_block' } : own,
  );
  if (kept && own === undefined) expect(String(replay.headers['anthropic-beta'])).toContain('thinking-binding-controls-2026-08-01');
  const { messages: _a, thinking: _t1, ...fieldsBefore } = rejected.json;
  const { messages: _b, thinking: _t2, ...fieldsAfter } = replay.json;
  expect(fieldsAfter).toEqual(fieldsBefore);
  expect(Object.keys(replay.json)).toEqual(Object.keys(rejected.json));
  expect(dialect.problems(sent)).toEqual([]);
}

/** Every tool_result right after the assistant message with its tool_use, every tool_use answered there. */
function brokenPairs(body: Body): string[] {
  const sent: any[] = body.messages;
  const broken: string[] = [];
  const blocks = (m: any) => (Array.isArray(m?.content) ? m.content : []);
  sent.forEach((m, i) => {
    const issued = new Set(
      sent[i - 1]?.role === 'assistant'
        ? blocks(sent[i - 1])
            .filter((b: any) => b.type === 'tool_use')
            .map((b: any) => b.id)
        : [],
    );
    for (const r of blocks(m).filter((b: any) => b.type === 'tool_result'))
      if (!issued.has(r.tool_use_id)) broken.push(`messages[${i}]: tool_result ${r.tool_use_id} without its tool_use`);
    const answered = new Set(
      blocks(sent[i + 1])
        .filter((b: any) => b.type === 'tool_result')
        .map((b: any) => b.tool_use_id),
    );
    if (m.role === 'assistant' && i + 1 < sent.length)
      for (const u of blocks(m).filter((b: any) => b.type === 'tool_use'))
        if (!answered.has(u.id)) broken.push(`messages[${i}]: tool_use ${u.id} without its tool_result`);
  });
  return broken;
}

const client = (origin: string) => new Anthropic({ baseURL: origin, apiKey: API_KEY, maxRetries: 0 });
const textOf = (content: any[]) =>
  content
    .filter((b) => b.type === 'text')
    .map((b) => b.text)
    .join('');

async function send(origin: string, body: Body, o: { stream: boolean; headers?: Record<string, string> }): Promise<Turn> {
  try {
    const { data, response } = o.stream
      ? await client(origin)
          .messages.stream(body as any, { headers: o.headers })
          .withResponse()
          .then(async ({ data: s, response: r }) => ({ data: await s.finalMessage(), response: r }))
      : await client(origin)
          .messages.create(body as any, { headers: o.headers })
          .withResponse();
    const message = data;
    // The blocks as Claude Code keeps them: every one, thinking included, without the SDK's additions.
    const answer = message.content.map(({ citations: _c, ...block }: any) => block);
    return { status: response.status, header: headerOf(response.headers.get('x-gateway-compaction')), text: textOf(answer), answer };
  } catch (err) {
    if (!(err instanceof Anthropic.APIError)) throw err;
    return {
      status: err.status!,
      header: headerOf(err.headers?.get('x-gateway-compaction')),
      text: '',
      answer: null,
      error: err.error?.error?.message,
    };
  }
}

export const messagesFixture: ApiFixture = {
  api: 'messages',
  upstreamUrl: (standIn) => standIn.baseUrl,
  request,
  next(body, turn) {
    const content = turn.answer as any[];
    const use = content.find((b) => b.type === 'tool_use');
    const n = body.messages.length;
    return {
      ...body,
      messages: [
        ...body.messages,
        { role: 'assistant', content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: fileText(n) }] },
      ],
    };
  },
  reject: (style) =>
    style === 'page' ? { reason: 'body_too_large', statesWindow: false } : { reason: 'context_length', statesWindow: true },
  preamble: () => [
    event('message_start', {
      message: {
        id: 'msg_started',
        type: 'message',
        role: 'assistant',
        model: 'claude-test',
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 10, output_tokens: 1 },
      },
    }),
    event('ping', {}),
  ],
  idleEvent: (_i, pad) => event('ping', { pad: 'x'.repeat(pad) }),
  contentEvent: () =>
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
    event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: CONTENT_TEXT } }),
  failureEvent: () =>
    event('error', { error: { type: 'invalid_request_error', message: 'prompt is too long: 30000 tokens > 20000 maximum' } }),
  send,
  async sdkStream(origin, body, onContent) {
    let said = '';
    try {
      for await (const e of (await client(origin).messages.create({ ...body, stream: true } as any)) as any) {
        if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') said += e.delta.text;
        if (said) onContent();
      }
      return { text: said, failure: 'none' };
    } catch (err) {
      return { text: said, failure: `thrown: ${(err as Error).message}` };
    }
  },
  // The SDK throws the error event as an APIError, after handing over what came before it.
  sdkFailure: /^thrown: .*prompt is too long: 30000 tokens > 20000 maximum/,
  wire: (body, stream) => (stream ? { ...body, stream } : body),
  post: (origin, bytes, o) =>
    fetch(`${origin}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': API_KEY, 'anthropic-version': '2023-06-01', ...o.headers },
      body: bytes,
    }),
  expectValidReplay: (rejected, replay) => expectValidMessagesReplay(rejected, replay),
  brokenPairs,
};
