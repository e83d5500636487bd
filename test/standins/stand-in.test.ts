import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { postJson } from '../helpers/gateway.js';
import { NGINX_413 } from '../helpers/nginx.js';
import { apiOf, startStandIn, type StandIn } from '../helpers/provider.js';
import { CHAT_MESSAGES, type StrictChat } from '../helpers/strict-chat.js';

/*
 * The strict chat completions stand-in checks what the API checks of a messages list (tool
 * messages answer the tool_calls right before them, every call is answered) with the API's exact
 * errors, and refuses a body past its window as deployments do. The declarative stand-in serves
 * every API from one server: a route per API, scripted answers first, the strict rules after.
 */

let chat: StrictChat | undefined;
let standIn: StandIn | undefined;
afterEach(async () => {
  await chat?.close();
  await standIn?.close();
  chat = standIn = undefined;
});

const call = (id: string) => ({
  role: 'assistant',
  content: null,
  tool_calls: [{ id, type: 'function', function: { name: 'read_file', arguments: '{"path":"a.ts"}' } }],
});
const output = (id: string) => ({ role: 'tool', tool_call_id: id, content: 'contents of a.ts' });
const user = { role: 'user', content: 'Review a.ts.' };

const post = (base: string, body: unknown, path = '/chat/completions') => postJson(`${base}${path}`, body);

describe('the strict chat completions stand-in', () => {
  it('takes a conversation whose every call is answered right after it, and answers with the call it was told to make', async () => {
    let n = 0;
    chat = await startStandIn({
      provider: 'chat',
      reply: () => (++n === 1 ? { toolCall: { id: 'call_9', name: 'read_file', arguments: '{"path":"b.ts"}' } } : {}),
    });
    const sdk = new OpenAI({ baseURL: chat.baseUrl, apiKey: 'x', maxRetries: 0 });
    const answer = await sdk.chat.completions.create({ model: 'gpt-test', messages: [user, call('call_1'), output('call_1')] as any });
    expect(answer.choices[0].message.tool_calls).toEqual([
      { id: 'call_9', type: 'function', function: { name: 'read_file', arguments: '{"path":"b.ts"}' } },
    ]);
    expect(answer.choices[0].finish_reason).toBe('tool_calls');
    const streamed: string[] = [];
    for await (const chunk of await sdk.chat.completions.create({ model: 'gpt-test', stream: true, messages: [user] as any }))
      streamed.push(chunk.choices[0]?.delta?.content ?? '');
    expect(streamed.join('')).toBe('next step');
    expect(chat.checks()).toEqual([{ refused: null }, { refused: null }]);
  });

  it.each([
    ['a tool message with no call before it', [user, output('call_1')], CHAT_MESSAGES.toolWithoutCall, 'messages.[1].role'],
    [
      'a tool message answering another call',
      [user, call('call_1'), output('call_1'), output('call_2')],
      CHAT_MESSAGES.toolWithoutCall,
      'messages.[3].role',
    ],
    ['a call left unanswered', [user, call('call_1'), user], CHAT_MESSAGES.unanswered(['call_1']), 'messages.[1].role'],
  ])('refuses %s with the API\u2019s 400', async (_what, messages, message, param) => {
    chat = await startStandIn({ provider: 'chat' });
    const res = await post(chat.baseUrl, { model: 'gpt-test', messages });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: { message, type: 'invalid_request_error', param, code: null } });
    expect(chat.checks()).toEqual([{ refused: message }]);
  });

  it('refuses a body past its window: stating the window, as an edge\u2019s 413 page, or inside a 200 stream', async () => {
    const body = { model: 'gpt-test', messages: [{ role: 'user', content: 'x'.repeat(2_000) }] };
    const tokens = Math.ceil(Buffer.byteLength(JSON.stringify(body)) / 4);
    chat = await startStandIn({ provider: 'chat', limitBytes: 1_000 });
    expect((await post(chat.baseUrl, body)).json.error).toEqual({
      message: CHAT_MESSAGES.window(250, tokens),
      type: 'invalid_request_error',
      param: 'messages',
      code: 'context_length_exceeded',
    });
    await chat.close();
    chat = await startStandIn({ provider: 'chat', limitBytes: 1_000, style: 'edge_413' });
    expect(await post(chat.baseUrl, body)).toMatchObject({ status: 413, text: NGINX_413 });
    await chat.close();
    chat = await startStandIn({ provider: 'chat', limitBytes: 1_000, style: 'sse_in_band' });
    const streamed = await post(chat.baseUrl, { ...body, stream: true });
    const streamedTokens = Math.ceil(Buffer.byteLength(JSON.stringify({ ...body, stream: true })) / 4);
    expect(streamed.status).toBe(200);
    expect(streamed.text).toBe(
      `data: ${JSON.stringify({ error: { message: CHAT_MESSAGES.window(250, streamedTokens), type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } })}\n\n`,
    );
  });
});

describe('the declarative stand-in', () => {
  it('routes each API by its path, and nothing else', () => {
    expect(
      [
        '/v1/chat/completions',
        '/v1/responses',
        '/v1/responses/compact',
        '/v1/messages?beta=true',
        '/v1beta/models/gemini-3:streamGenerateContent?alt=sse',
        '/v1/models',
      ].map(apiOf),
    ).toEqual(['chat', 'responses', 'responses', 'messages', 'gemini', null]);
  });

  it('serves the scripted answers first, in order, then each API\u2019s strict rules; the summarizer apart', async () => {
    standIn = await startStandIn({ summarizer: { status: 503, json: { error: { message: 'overloaded' } } } });
    standIn.script({ status: 418, json: { scripted: 1 } }, { events: ['data: one\n\n', 'data: two\n\n'] });
    expect(await post(standIn.baseUrl, { model: 'm', messages: [user] })).toMatchObject({ status: 418, json: { scripted: 1 } });
    expect(await post(standIn.baseUrl, { model: 'm', input: 'hi' }, '/responses')).toMatchObject({
      status: 200,
      text: 'data: one\n\ndata: two\n\n',
    });
    // The rules from here: each API's own checks.
    expect((await post(standIn.baseUrl, { model: 'm', messages: [user, output('call_1')] })).json.error.message).toBe(
      CHAT_MESSAGES.toolWithoutCall,
    );
    expect((await post(standIn.baseUrl, { model: 'm', max_tokens: 10, messages: [user] }, '/messages')).status).toBe(200);
    expect((await post(standIn.origin, { contents: [user] }, '/v1beta/models/gemini-3:generateContent')).json.error.status).toBe(
      'PERMISSION_DENIED',
    );
    const summarizer = await fetch(`${standIn.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'x-gateway-compaction': 'summarizer' },
      body: '{}',
    });
    expect(summarizer.status).toBe(503);
    expect(standIn.calls().map((r) => apiOf(r.url))).toEqual(['chat', 'responses', 'chat', 'messages', 'gemini']);
    expect(standIn.summarizerCalls()).toHaveLength(1);
    expect(standIn.verdicts('chat')).toEqual([CHAT_MESSAGES.toolWithoutCall]);
    expect(standIn.answerBytes(standIn.calls()[1]).toString()).toBe('data: one\n\ndata: two\n\n');
    expect(standIn.answerHeaders(standIn.calls()[0])['content-type']).toBe('application/json');
  });

  it('answers each summarizer call with what a function makes of it, and keeps the status of every answer', async () => {
    standIn = await startStandIn({ limitBytes: 200, summarizer: async (req) => ({ status: 200, json: { summary: req.body.length } }) });
    expect((await post(standIn.baseUrl, { model: 'm', messages: [{ role: 'user', content: 'x'.repeat(300) }] })).status).toBe(400);
    expect((await post(standIn.baseUrl, { model: 'm', messages: [user] })).status).toBe(200);
    const summarizer = await fetch(`${standIn.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'x-gateway-compaction': 'summarizer' },
      body: '{"n":1}',
    });
    expect(await summarizer.json()).toEqual({ summary: 7 });
    expect(standIn.calls('chat').map((r) => standIn!.answerStatus(r))).toEqual([400, 200]);
    expect(standIn.answerStatus(standIn.summarizerCalls()[0])).toBe(200);
  });

  it('holds a model call until told to answer it (a slow model), the summarizer\u2019s and the others not', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    standIn = await startStandIn({
      hold: (req) => (req.json?.model === 'slow' ? released : undefined),
      summarizer: { status: 200, json: { summary: 1 } },
    });
    const slow = post(standIn.baseUrl, { model: 'slow', messages: [user] });
    const held = () => standIn!.calls().find((r) => r.json.model === 'slow');
    for (let i = 0; i < 250 && !held(); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await post(standIn.baseUrl, { model: 'quick', messages: [user] })).status).toBe(200);
    const summarizer = await fetch(`${standIn.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'x-gateway-compaction': 'summarizer' },
      body: '{"model":"slow"}',
    });
    expect(summarizer.status).toBe(200);
    expect(standIn.answerStatus(held()!)).toBeUndefined();
    release();
    expect((await slow).json.choices[0].message.content).toBe('next step');
    expect(standIn.answerStatus(held()!)).toBe(200);
  });

  it("lists its models at GET /v1/models in the shape of the API asking (OpenAI's list, Anthropic's page), and is not a model call", async () => {
    standIn = await startStandIn();
    const openai = await new OpenAI({ baseURL: standIn.baseUrl, apiKey: 'x', maxRetries: 0 }).models.list();
    expect(openai.data.map((m) => m.id)).toEqual(['fake-model']);
    const anthropic = await fetch(`${standIn.baseUrl}/models`, { headers: { 'anthropic-version': '2023-06-01' } });
    expect(await anthropic.json()).toMatchObject({ data: [{ type: 'model', id: 'claude-test' }], has_more: false });
    expect((await fetch(`${standIn.baseUrl}/models`, { method: 'POST', body: '{}' })).status).toBe(404);
    expect(standIn.calls()).toEqual([]);
  });
});
