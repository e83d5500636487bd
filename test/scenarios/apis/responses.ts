import OpenAI from 'openai';
import { expect } from 'vitest';
import { validateCompaction } from '../../../src/compaction/validate.js';
import { responses as dialect } from '../../../src/dialects/responses.js';
import type { Received } from '../../helpers/fake-upstream.js';
import { CONTEXT_WINDOW_MESSAGE, event, preamble, responseObject } from '../../helpers/strict-responses.js';
import { CONTENT_TEXT, fileText, headerOf, QUESTION, REMARK, TASK, type ApiFixture, type Body, type Turn } from './fixture.js';

/* The Responses API, as Codex sends it: store off, encrypted reasoning asked for, the whole input every turn. */

const API_KEY = 'sk-codex-agent';
const text = (role: string, type: string, value: string) => ({ type: 'message', role, content: [{ type, text: value }] });

function request(turns: number): Body {
  const input: any[] = [text('developer', 'input_text', 'You are Codex, a coding agent.'), text('user', 'input_text', TASK)];
  for (let t = 1; t <= turns; t++) {
    input.push({
      type: 'function_call',
      call_id: `call_${t}`,
      name: 'read_file',
      arguments: JSON.stringify({ path: `src/module${t}.ts` }),
    });
    input.push({ type: 'function_call_output', call_id: `call_${t}`, output: fileText(t) });
  }
  input.push(text('assistant', 'output_text', REMARK), text('user', 'input_text', QUESTION));
  return {
    model: 'gpt-test',
    instructions: 'Work in the repository at /src.',
    input,
    tools: [
      {
        type: 'function',
        name: 'read_file',
        description: 'Read a file',
        strict: false,
        parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      },
    ],
    tool_choice: 'auto',
    parallel_tool_calls: false,
    reasoning: { effort: 'medium', summary: 'auto' },
    store: false,
    include: ['reasoning.encrypted_content'],
    prompt_cache_key: 'agent-7',
  };
}

/** What a replay must be: valid for the API, smaller, every other field exactly as sent. */
export function expectValidResponsesReplay(rejected: Received, replay: Received, limit = rejected.body.length): void {
  expect(validateCompaction(dialect, rejected.json.input, replay.json.input)).toEqual([]);
  expect(replay.body.length).toBeLessThan(limit);
  const { input: _a, ...before } = rejected.json;
  const { input: _b, ...after } = replay.json;
  expect(after).toEqual(before);
  expect(Object.keys(replay.json)).toEqual(Object.keys(rejected.json));
  // The instruction prefix (the developer messages) is byte-identical and first.
  expect(JSON.stringify(replay.json.input.slice(0, 2))).toBe(JSON.stringify(rejected.json.input.slice(0, 2)));
  // Reasoning items kept are byte-identical to one sent; none is ever invented or edited.
  const sent = new Set(rejected.json.input.filter((i: any) => i.type === 'reasoning').map((i: any) => JSON.stringify(i)));
  for (const item of replay.json.input.filter((i: any) => i.type === 'reasoning')) expect(sent.has(JSON.stringify(item))).toBe(true);
  // The newest item, the one the model has not seen yet, is kept whole.
  expect(JSON.stringify(replay.json.input.at(-1))).toBe(JSON.stringify(rejected.json.input.at(-1)));
  expect(brokenPairs(replay.json)).toEqual([]);
}

/** No output without its call, no call without its output. */
function brokenPairs(body: Body): string[] {
  const items: any[] = body.input;
  const calls = new Set(items.filter((i) => i.type === 'function_call').map((i) => i.call_id));
  const outputs = new Set(items.filter((i) => i.type === 'function_call_output').map((i) => i.call_id));
  return [
    ...[...outputs].filter((id) => !calls.has(id)).map((id) => `output of ${id} without its call`),
    ...[...calls].filter((id) => !outputs.has(id)).map((id) => `call ${id} without its output`),
  ];
}

const client = (origin: string) => new OpenAI({ baseURL: `${origin}/v1`, apiKey: API_KEY, maxRetries: 0 });

async function send(origin: string, body: Body, o: { stream: boolean; headers?: Record<string, string> }): Promise<Turn> {
  try {
    const { data, response } = await client(origin)
      .responses.create({ ...body, stream: o.stream } as any, { headers: o.headers })
      .withResponse();
    const header = headerOf(response.headers.get('x-gateway-compaction'));
    if (!o.stream) return { status: response.status, header, text: (data as any).output_text, answer: (data as any).output };
    const output: any[] = [];
    let said = '';
    for await (const e of data as any) {
      if (e.type === 'response.output_item.done') output.push(e.item);
      if (e.type === 'response.output_text.delta') said += e.delta;
    }
    return { status: response.status, header, text: said, answer: output };
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

const at = { item_id: 'msg_started', output_index: 0, content_index: 0 };

export const responsesFixture: ApiFixture = {
  api: 'responses',
  upstreamUrl: (standIn) => standIn.baseUrl,
  request,
  next(body, turn) {
    const items = turn.answer as any[];
    const call = items.find((i) => i.type === 'function_call');
    return {
      ...body,
      input: [...body.input, ...items, { type: 'function_call_output', call_id: call.call_id, output: fileText(body.input.length) }],
    };
  },
  // The API's 400 says the input exceeds the window, not by how much.
  reject: (style) =>
    style === 'page' ? { reason: 'body_too_large', statesWindow: false } : { reason: 'context_length', statesWindow: false },
  preamble: () => preamble('resp_started'),
  idleEvent: (i, pad) =>
    event('response.in_progress', { response: responseObject('', 'in_progress', 'resp_started'), pad: 'x'.repeat(pad) }, 2 + i),
  contentEvent: () =>
    [
      event(
        'response.output_item.added',
        { output_index: 0, item: { type: 'message', id: 'msg_started', status: 'in_progress', role: 'assistant', content: [] } },
        2,
      ),
      event('response.content_part.added', { ...at, part: { type: 'output_text', text: '', annotations: [] } }, 3),
      event('response.output_text.delta', { ...at, delta: CONTENT_TEXT, logprobs: [] }, 4),
    ].join(''),
  failureEvent: () =>
    event(
      'response.failed',
      {
        response: {
          ...responseObject('', 'failed', 'resp_started'),
          error: { code: 'context_length_exceeded', message: CONTEXT_WINDOW_MESSAGE },
        },
      },
      5,
    ),
  send,
  async sdkStream(origin, body, onContent) {
    let said = '';
    let failure = 'none';
    try {
      for await (const e of (await client(origin).responses.create({ ...body, stream: true } as any)) as any) {
        if (e.type === 'response.output_text.delta') said += e.delta;
        if (said) onContent();
        if (e.type === 'response.failed') failure = `event response.failed: ${e.response.error.message}`;
      }
      return { text: said, failure };
    } catch (err) {
      return { text: said, failure: `thrown: ${(err as Error).message}` };
    }
  },
  // The SDK hands the agent response.failed as one more event.
  sdkFailure: /^event response\.failed: Your input exceeds the context window/,
  wire: (body, stream) => ({ ...body, stream }),
  post: (origin, bytes, o) =>
    fetch(`${origin}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}`, ...o.headers },
      body: bytes,
    }),
  expectValidReplay: (rejected, replay) => expectValidResponsesReplay(rejected, replay),
  brokenPairs,
};
