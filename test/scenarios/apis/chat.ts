import OpenAI from 'openai';
import { expect } from 'vitest';
import { validateCompaction } from '../../../src/compaction/validate.js';
import { chat as dialect } from '../../../src/dialects/chat.js';
import type { Received } from '../../helpers/fake-upstream.js';
import { CHAT_MESSAGES } from '../../helpers/strict-chat.js';
import { CONTENT_TEXT, fileText, headerOf, QUESTION, REMARK, TASK, type ApiFixture, type Body, type Turn } from './fixture.js';

/* Chat completions, as an OpenAI-SDK agent sends them (Aider, Continue, OpenHands). */

const API_KEY = 'sk-chat-agent';
const base = { id: 'chatcmpl-started', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'gpt-test' };
const sse = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;

function request(turns: number): Body {
  const messages: any[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: TASK },
  ];
  for (let t = 1; t <= turns; t++) {
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: `call_${t}`, type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ path: `src/module${t}.ts` }) } },
      ],
    });
    messages.push({ role: 'tool', tool_call_id: `call_${t}`, content: fileText(t) });
  }
  messages.push({ role: 'assistant', content: REMARK }, { role: 'user', content: QUESTION });
  return {
    model: 'gpt-test',
    messages,
    tools: [
      {
        type: 'function',
        function: {
          name: 'read_file',
          description: 'Read a file',
          strict: true,
          parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'], additionalProperties: false },
        },
      },
    ],
    tool_choice: 'auto',
    parallel_tool_calls: false,
    max_tokens: 500,
    temperature: 0.2,
    user: 'agent-7',
  };
}

/**
 * Checks a replayed request against the rejected one: valid, smaller, same parameters. Masking
 * keeps every message in place (placeholders stand in for old tool outputs); a summary stands in
 * for several messages, so there are fewer.
 */
export function expectValidChatReplay(rejected: Received, replay: Received, header = /outcome=replayed/): void {
  const original = rejected.json.messages as unknown[];
  const compacted = replay.json.messages as unknown[];
  expect(validateCompaction(dialect, original, compacted)).toEqual([]);
  if (/strategy=mask\b/.test(String(replay.headers['x-gateway-compaction']))) {
    expect(compacted.length).toBe(original.length);
    expect(JSON.stringify(compacted)).toContain('[tool output omitted by compaction-gateway: ');
  } else {
    expect(compacted.length).toBeLessThan(original.length);
  }
  expect(replay.body.length).toBeLessThan(rejected.body.length);
  const { messages: _a, ...paramsBefore } = rejected.json;
  const { messages: _b, ...paramsAfter } = replay.json;
  expect(paramsAfter).toEqual(paramsBefore);
  expect(Object.keys(replay.json)).toEqual(Object.keys(rejected.json));
  expect(replay.headers.authorization).toBe(rejected.headers.authorization);
  expect(replay.headers['x-gateway-compaction']).toMatch(header);
}

function brokenPairs(body: Body): string[] {
  const messages: any[] = body.messages;
  const broken: string[] = [];
  messages.forEach((m, i) => {
    if (m.role === 'tool') {
      let k = i - 1;
      while (k >= 0 && messages[k].role === 'tool') k--;
      if (!(messages[k]?.tool_calls ?? []).some((c: any) => c.id === m.tool_call_id))
        broken.push(`messages[${i}]: output of ${m.tool_call_id} without its call`);
    }
    for (const call of m.role === 'assistant' ? (m.tool_calls ?? []) : []) {
      let k = i + 1;
      while (k < messages.length && messages[k].role === 'tool' && messages[k].tool_call_id !== call.id) k++;
      if (messages[k]?.role !== 'tool') broken.push(`messages[${i}]: call ${call.id} without its output`);
    }
  });
  return broken;
}

const client = (origin: string) => new OpenAI({ baseURL: `${origin}/v1`, apiKey: API_KEY, maxRetries: 0 });

async function send(origin: string, body: Body, o: { stream: boolean; headers?: Record<string, string> }): Promise<Turn> {
  try {
    if (!o.stream) {
      const { data, response } = await client(origin)
        .chat.completions.create({ ...body, stream: false } as any, { headers: o.headers })
        .withResponse();
      const message = data.choices[0].message;
      return {
        status: response.status,
        header: headerOf(response.headers.get('x-gateway-compaction')),
        text: message.content ?? '',
        answer: message,
      };
    }
    const { data, response } = await client(origin)
      .chat.completions.create({ ...body, stream: true } as any, { headers: o.headers })
      .withResponse();
    let text = '';
    const calls: any[] = [];
    for await (const chunk of data as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>) {
      const delta: any = chunk.choices[0]?.delta ?? {};
      text += delta.content ?? '';
      for (const c of delta.tool_calls ?? []) {
        calls[c.index] ??= { id: c.id, type: 'function', function: { name: '', arguments: '' } };
        calls[c.index].function.name += c.function?.name ?? '';
        calls[c.index].function.arguments += c.function?.arguments ?? '';
      }
    }
    const answer = { role: 'assistant', content: text || null, ...(calls.length ? { tool_calls: calls } : {}) };
    return { status: response.status, header: headerOf(response.headers.get('x-gateway-compaction')), text, answer };
  } catch (err) {
    if (!(err instanceof OpenAI.APIError)) throw err;
    return {
      status: err.status!,
      header: headerOf(err.headers?.get('x-gateway-compaction')),
      text: '',
      answer: null,
      error: err.error?.message,
    };
  }
}

export const chatFixture: ApiFixture = {
  api: 'chat',
  upstreamUrl: (standIn) => standIn.baseUrl,
  request,
  next(body, turn) {
    const call = (turn.answer as any).tool_calls[0];
    const n = body.messages.length;
    return { ...body, messages: [...body.messages, turn.answer, { role: 'tool', tool_call_id: call.id, content: fileText(n) }] };
  },
  reject: (style) =>
    style === 'page' ? { reason: 'body_too_large', statesWindow: false } : { reason: 'context_length', statesWindow: true },
  // A chat stream has no preamble: its first chunk is already the answer.
  preamble: () => [],
  idleEvent: () => null,
  contentEvent: () =>
    sse({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: CONTENT_TEXT }, logprobs: null, finish_reason: null }] }),
  failureEvent: () =>
    sse({
      error: {
        message: CHAT_MESSAGES.window(8_192, 9_000),
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    }),
  send,
  async sdkStream(origin, body, onContent) {
    let text = '';
    try {
      const stream = await client(origin).chat.completions.create({ ...body, stream: true } as any);
      for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>) {
        text += chunk.choices[0]?.delta?.content ?? '';
        if (text) onContent();
      }
      return { text, failure: 'none' };
    } catch (err) {
      return { text, failure: `thrown: ${(err as Error).message}` };
    }
  },
  // The SDK throws the error event as an APIError, after handing over what came before it.
  sdkFailure: /^thrown: This model's maximum context length is 8192 tokens/,
  wire: (body, stream) => ({ ...body, stream }),
  post: (origin, bytes, o) =>
    fetch(`${origin}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}`, ...o.headers },
      body: bytes,
    }),
  expectValidReplay: (rejected, replay) => expectValidChatReplay(rejected, replay),
  brokenPairs,
};
