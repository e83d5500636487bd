import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import type { StrictResponses, StrictResponsesOptions } from '../helpers/strict-responses.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * The strict Responses stand-in binds each reasoning item to the history before it, as the API
 * documents ("Keep the prefix unchanged"), and answers with the API's exact errors. Each scenario
 * builds a conversation from the items the stand-in issued, through the official SDK, then
 * changes one thing and sends it again.
 */

const MODEL = 'gpt-6';
const INSTRUCTIONS = 'You review code.';
const TOOLS = [
  {
    type: 'function',
    name: 'read_file',
    description: 'Read a file',
    parameters: { type: 'object', properties: { path: { type: 'string' } } },
    strict: false,
  },
];

let upstream: StrictResponses;
afterEach(async () => upstream?.close());

/** Odd answers read a file, even ones answer in text: every conversation has tool rounds. */
async function start(options: StrictResponsesOptions = {}) {
  let calls = 0;
  upstream = await startStandIn({
    provider: 'responses',
    reply: () =>
      ++calls % 2 === 1
        ? { call: { call_id: `call_${calls}`, name: 'read_file', arguments: `{"path":"f${calls}.ts"}` } }
        : { text: `reviewed ${calls}` },
    ...options,
  });
  return new OpenAI({ baseURL: upstream.baseUrl, apiKey: 'x', maxRetries: 0 });
}

const request = (input: any[], extra: Record<string, unknown> = {}): any => ({
  model: MODEL,
  instructions: INSTRUCTIONS,
  tools: TOOLS,
  store: false,
  input,
  ...extra,
});

/** The user's first turn, then `answers` answers appended as returned, each followed by the user's
 * turn. With three: 1 rs_1, 2 fc_1, 3 its output, 4 rs_2, 5 msg_2, 6 user, 7 rs_3, 8 fc_3, 9 its output. */
async function converse(api: OpenAI, answers: number, send: 'create' | 'stream' = 'create'): Promise<any[]> {
  let input: any[] = [{ role: 'user', content: 'Review src/.' }];
  for (let n = 0; n < answers; n++) {
    const params = request(input);
    const answer = send === 'create' ? await api.responses.create(params) : await api.responses.stream(params).finalResponse();
    const call: any = answer.output.find((item) => item.type === 'function_call');
    const next = call
      ? { type: 'function_call_output', call_id: call.call_id, output: 'contents of the file' }
      : { role: 'user', content: `go on after ${n}` };
    input = [...input, ...answer.output, next];
  }
  return input;
}

async function refusal(sent: Promise<unknown>): Promise<{ status: number; error: any }> {
  const err = await sent.then(
    () => null,
    (e) => e,
  );
  expect(err, 'the request was refused').toBeInstanceOf(OpenAI.APIError);
  return { status: err.status, error: err.error };
}

const removed = (...ids: string[]) => ids.map((id) => ({ type: 'reasoning', action: 'removed', id, reason: 'prefix_changed' }));
const replace = (input: any[], k: number, item: any) => input.map((it, n) => (n === k ? item : it));

describe('appending', () => {
  it.each(['create', 'stream'] as const)('keeps every reasoning item it issued (%s)', async (send) => {
    const api = await start();
    const input = await converse(api, 3, send);
    const answer: any = await api.responses.create(request(input));
    expect(answer.input_transformations).toEqual([]);
    expect(input.filter((item) => item.type === 'reasoning').map((item) => item.id)).toEqual(['rs_1', 'rs_2', 'rs_3']);
    expect(upstream.issued().map((i) => i.call)).toEqual([0, 1, 2, 3]);
    expect(upstream.checks()).toEqual(Array(4).fill({ refused: null, removed: [] }));
  });
});

describe('a changed prefix', () => {
  it.each([
    ['an earlier item', (input: any[]) => request(replace(input, 3, { ...input[3], output: 'shortened' })), ['rs_2', 'rs_3']],
    ['an earlier user message', (input: any[]) => request(replace(input, 6, { role: 'user', content: 'go on, differently' })), ['rs_3']],
    ['the instructions', (input: any[]) => request(input, { instructions: 'You review code carefully.' }), ['rs_1', 'rs_2', 'rs_3']],
    ['the tools', (input: any[]) => request(input, { tools: [...TOOLS, { ...TOOLS[0], name: 'write_file' }] }), ['rs_1', 'rs_2', 'rs_3']],
  ])('%s drops the reasoning items after it silently, and lists them', async (_, change, ids) => {
    const api = await start();
    const answer: any = await api.responses.create(change(await converse(api, 3)));
    expect(answer.status).toBe('completed');
    expect(answer.input_transformations).toEqual(removed(...ids));
    expect(upstream.checks().at(-1)).toEqual({ refused: null, removed: ids });
  });

  it('earlier reasoning items are not part of the prefix', async () => {
    const api = await start();
    const input = await converse(api, 3);
    const summarized = replace(input, 1, { ...input[1], summary: [{ type: 'summary_text', text: 'Read the file first.' }] });
    const answer: any = await api.responses.create(request(summarized));
    expect(answer.input_transformations).toEqual([]);
  });

  it('key order is not a change', async () => {
    const api = await start();
    const input = (await converse(api, 3)).map((item) => Object.fromEntries(Object.entries(item).reverse()));
    const answer: any = await api.responses.create(request(input, { max_output_tokens: 2000, reasoning: { effort: 'high' } }));
    expect(answer.input_transformations).toEqual([]);
  });

  it('is listed on response.created and response.completed when streaming', async () => {
    const api = await start();
    const input = await converse(api, 3);
    const events: any[] = [];
    for await (const e of api.responses.stream(request(replace(input, 6, { role: 'user', content: 'changed' })))) events.push(e);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      ...['response.output_item.added', 'response.output_item.done'],
      'response.output_item.added',
      ...['response.content_part.added', 'response.output_text.delta', 'response.output_text.done', 'response.content_part.done'],
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, n) => n));
    expect(events[0].response.input_transformations).toEqual(removed('rs_3'));
    expect(events.at(-1).response.input_transformations).toEqual(removed('rs_3'));
    expect(events.at(-1).response.output).toEqual(upstream.issued().at(-1)?.items);
  });
});

describe('a reasoning item and the item it was issued before', () => {
  it('a function_call without its reasoning item is refused', async () => {
    const api = await start();
    const input = (await converse(api, 3)).filter((item) => item.id !== 'rs_3');
    const res = await fetch(`${upstream.baseUrl}/responses`, { method: 'POST', body: JSON.stringify(request(input)) });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        message: "Item 'fc_3' of type 'function_call' was provided without its required 'reasoning' item: 'rs_3'.",
        type: 'invalid_request_error',
        param: 'input',
        code: null,
      },
    });
  });

  it('a message without its reasoning item is refused the same way', async () => {
    const api = await start();
    const { error } = await refusal(api.responses.create(request((await converse(api, 3)).filter((item) => item.id !== 'rs_2'))));
    expect(error.message).toBe("Item 'msg_2' of type 'message' was provided without its required 'reasoning' item: 'rs_2'.");
  });

  it('a reasoning item without its following item is refused', async () => {
    const api = await start();
    const { status, error } = await refusal(api.responses.create(request((await converse(api, 3)).filter((item) => item.id !== 'fc_3'))));
    expect(status).toBe(400);
    expect(error).toEqual({
      message: "Item 'rs_3' of type 'reasoning' was provided without its required following item.",
      type: 'invalid_request_error',
      param: 'input',
      code: null,
    });
  });

  it('both left out, with the ids of what stays, is accepted', async () => {
    const api = await start();
    const input = (await converse(api, 3)).filter((item) => item.type !== 'reasoning').map(({ id: _, ...item }) => item);
    const answer: any = await api.responses.create(request(input));
    expect(answer.input_transformations).toEqual([]);
  });
});

describe('encrypted content that is not what it issued', () => {
  const edited = (sealed: string) => {
    const [body, tag] = sealed.split('.');
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString());
    return `${Buffer.from(JSON.stringify({ ...payload, input: 'x' })).toString('base64url')}.${tag}`;
  };
  it.each([
    ['forged', () => 'gAAAAABforged'],
    ['edited', edited],
    ['missing', () => undefined],
  ])('%s is a 400', async (_, tamper) => {
    const api = await start();
    const input = await converse(api, 3);
    const { status, error } = await refusal(
      api.responses.create(request(replace(input, 4, { ...input[4], encrypted_content: tamper(input[4].encrypted_content) }))),
    );
    expect(status).toBe(400);
    expect(error).toEqual({
      message: 'The encrypted content for item rs_2 could not be verified.',
      type: 'invalid_request_error',
      param: null,
      code: 'invalid_encrypted_content',
    });
  });
});

describe('the window', () => {
  const big = [{ role: 'user', content: 'x'.repeat(3000) }];
  const send = (stream: boolean) =>
    fetch(`${upstream.baseUrl}/responses`, { method: 'POST', body: JSON.stringify(request(big, { stream })) });
  const overflow = {
    error: {
      message: 'Your input exceeds the context window of this model. Please adjust your input and try again.',
      type: 'invalid_request_error',
      param: 'input',
      code: 'context_length_exceeded',
    },
  };

  it('context_length: a 400', async () => {
    await start({ limitBytes: 2000, style: 'context_length' });
    const res = await send(false);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual(overflow);
  });

  it('edge_413: an HTML 413 before anything is checked', async () => {
    await start({ limitBytes: 2000, style: 'edge_413' });
    const res = await fetch(`${upstream.baseUrl}/responses`, {
      method: 'POST',
      body: JSON.stringify(request([...big, { type: 'reasoning', id: 'rs_x', summary: [] }])),
    });
    expect(res.status).toBe(413);
    expect(await res.text()).toContain('<title>413 Request Entity Too Large</title>');
  });

  it('stream_failed: created, in_progress, then response.failed; a 400 when not streaming', async () => {
    await start({ limitBytes: 2000, style: 'stream_failed' });
    const events = (await (await send(true)).text())
      .split('\n\n')
      .filter(Boolean)
      .map((e) => JSON.parse(e.split('\ndata: ')[1]));
    expect(events.map((e) => e.type)).toEqual(['response.created', 'response.in_progress', 'response.failed']);
    expect(events[2].response.error.code).toBe('context_length_exceeded');
    expect(await (await send(false)).json()).toEqual(overflow);
  });

  it('comes after the reasoning checks', async () => {
    await start({ limitBytes: 2000 });
    const res = await fetch(`${upstream.baseUrl}/responses`, {
      method: 'POST',
      body: JSON.stringify(request([...big, { type: 'reasoning', id: 'rs_x', summary: [], encrypted_content: 'nope' }])),
    });
    expect(((await res.json()) as any).error.code).toBe('invalid_encrypted_content');
  });
});

describe('the summarizer', () => {
  it('is checked like any request and answered in plain text, outside checks()', async () => {
    const api = await start();
    const input = await converse(api, 1);
    const summarizer = { headers: { 'x-gateway-compaction': 'summarizer' } };
    const summary = await api.responses.create(request([{ role: 'user', content: 'a transcript' }]), summarizer);
    expect(summary.output.map((item) => item.type)).toEqual(['message']);
    expect(summary.output_text).toMatch(/^SUMMARY of \d+ chars/);
    const { status } = await refusal(api.responses.create(request(input.filter((item) => item.type !== 'reasoning')), summarizer));
    expect(status).toBe(400);
    expect(upstream.summarizerCalls()).toHaveLength(2);
    expect(upstream.checks()).toHaveLength(1);
  });
});
