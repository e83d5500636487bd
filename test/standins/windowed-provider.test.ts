import { afterEach, describe, expect, it } from 'vitest';
import type { VllmWording, WindowedProvider } from '../helpers/windowed-provider.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * The windowed stand-in holds every request to its window as vLLM does and answers with vLLM's
 * exact 400. The expected texts are written out here, apart from the stand-in's own templates.
 */

const WINDOW = 1_500;

let upstream: WindowedProvider;
afterEach(async () => upstream?.close());

/** A chat body of exactly `tokens` prompt tokens by the stand-in's count (4 bytes a token). */
function bodyOf(tokens: number, extra: Record<string, unknown> = {}): string {
  const base = (content: string) => JSON.stringify({ model: 'm', messages: [{ role: 'user', content }], ...extra });
  const text = base('x'.repeat(tokens * 4 - base('').length));
  expect(Buffer.byteLength(text)).toBe(tokens * 4);
  return text;
}

async function post(body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${upstream.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

const flat = (message: string) => ({ object: 'error', message, type: 'BadRequestError', param: null, code: 400 });
const nested = (message: string) => ({ error: { message, type: 'BadRequestError', param: null, code: 400 } });

describe.each([
  {
    wording: 'vllm-0.9' as VllmWording,
    envelope: flat,
    completionOver:
      "This model's maximum context length is 1500 tokens. However, you requested 1501 tokens (1245 in the messages, 256 in the completion). Please reduce the length of the messages or completion.",
    promptOver:
      "This model's maximum context length is 1500 tokens. However, you requested 2256 tokens (2000 in the messages, 256 in the completion). Please reduce the length of the messages or completion.",
    noLimitOver:
      "This model's maximum context length is 1500 tokens. However, you requested 1500 tokens in the messages, Please reduce the length of the messages.",
  },
  {
    wording: 'vllm-0.4' as VllmWording,
    envelope: flat,
    completionOver:
      "This model's maximum context length is 1500 tokens. However, you requested 1501 tokens (1245 in the messages, 256 in the completion). Please reduce the length of the messages or completion.",
    promptOver:
      "This model's maximum context length is 1500 tokens. However, you requested 2256 tokens (2000 in the messages, 256 in the completion). Please reduce the length of the messages or completion.",
    noLimitOver: 'max_tokens must be at least 1, got 0.',
  },
  {
    wording: 'vllm-0.10' as VllmWording,
    envelope: nested,
    completionOver:
      "'max_tokens' or 'max_completion_tokens' is too large: 256. This model's maximum context length is 1500 tokens and your request has 1245 input tokens (256 > 1500 - 1245).",
    promptOver:
      "This model's maximum context length is 1500 tokens. However, your request has 2000 input tokens. Please reduce the length of the input messages.",
    noLimitOver:
      "This model's maximum context length is 1500 tokens. However, your request has 1500 input tokens. Please reduce the length of the input messages.",
  },
])('$wording', ({ wording, envelope, completionOver, promptOver, noLimitOver }) => {
  it('refuses a prompt over the window with the exact 400', async () => {
    upstream = await startStandIn({ provider: 'windowed', window: WINDOW, wording });
    const res = await post(bodyOf(2_000, { max_tokens: 256 }));
    expect(res.status).toBe(400);
    expect(res.type).toBe('application/json');
    expect(JSON.parse(res.text)).toEqual(envelope(promptOver));
    expect(upstream.refusals().map((c) => [c.promptTokens, c.completionTokens, c.error])).toEqual([[2_000, 256, promptOver]]);
  });

  it('refuses a prompt that fits when prompt + max_tokens does not', async () => {
    upstream = await startStandIn({ provider: 'windowed', window: WINDOW, wording });
    const res = await post(bodyOf(1_245, { max_tokens: 256 }));
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual(envelope(completionOver));
  });

  it('refuses a prompt that fills the window when no completion limit is set', async () => {
    upstream = await startStandIn({ provider: 'windowed', window: WINDOW, wording });
    const res = await post(bodyOf(1_500));
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual(envelope(noLimitOver));
  });

  it('answers a request that fits exactly', async () => {
    upstream = await startStandIn({ provider: 'windowed', window: WINDOW, wording });
    const res = await post(bodyOf(1_244, { max_tokens: 256 }));
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text).choices[0].message.content).toBe('rescued answer');
    expect((await post(bodyOf(1_499))).status).toBe(200);
    expect(upstream.refusals()).toEqual([]);
  });
});

it('reads max_completion_tokens before max_tokens, as vLLM does', async () => {
  upstream = await startStandIn({ provider: 'windowed', window: WINDOW });
  const res = await post(bodyOf(1_000, { max_tokens: 100, max_completion_tokens: 600 }));
  expect(res.status).toBe(400);
  expect(JSON.parse(res.text).message).toContain('(1000 in the messages, 600 in the completion)');
});

it('streams the answer when asked, and still refuses before streaming', async () => {
  upstream = await startStandIn({ provider: 'windowed', window: WINDOW });
  const ok = await post(bodyOf(500, { max_tokens: 256, stream: true }));
  expect(ok.type).toBe('text/event-stream');
  const pieces = ok.text
    .split('\n\n')
    .filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content ?? '');
  expect(pieces.join('')).toBe('rescued answer');
  const refused = await post(bodyOf(2_000, { max_tokens: 256, stream: true }));
  expect(refused.status).toBe(400);
  expect(refused.type).toBe('application/json');
});

it("answers a summarizer call with a summary inside the call's max_tokens", async () => {
  upstream = await startStandIn({ provider: 'windowed', window: WINDOW });
  const transcript = `<conversation>\n${'alpha beta gamma delta epsilon zeta eta theta '.repeat(60)}\n</conversation>`;
  const body = JSON.stringify({
    model: 'm',
    messages: [
      { role: 'system', content: 'Summarise.' },
      { role: 'user', content: transcript },
    ],
    max_tokens: 10,
    stream: false,
  });
  const res = await post(body, { 'x-gateway-compaction': 'summarizer' });
  expect(res.status).toBe(200);
  const text = JSON.parse(res.text).choices[0].message.content;
  expect(text.length).toBeLessThanOrEqual(40);
  expect(text).toBe(`Summary 1 of ${transcript.length} characters: alpha beta gamma delta epsilon zeta`.slice(0, 40));
  const wide = await post(body.replace('"max_tokens":10', '"max_tokens":200'), { 'x-gateway-compaction': 'summarizer' });
  expect(JSON.parse(wide.text).choices[0].message.content).toBe(
    `Summary 2 of ${transcript.length} characters: alpha beta gamma delta epsilon zeta`,
  );
  expect(upstream.summarizerCalls().map((c) => c.answer)).toEqual([text, JSON.parse(wide.text).choices[0].message.content]);
  expect(upstream.mainCalls()).toEqual([]);
});

it('refuses a summarizer call over the window like any other request', async () => {
  upstream = await startStandIn({ provider: 'windowed', window: WINDOW });
  const res = await post(bodyOf(1_400, { max_tokens: 200 }), { 'x-gateway-compaction': 'summarizer' });
  expect(res.status).toBe(400);
  expect(JSON.parse(res.text).message).toContain('(1400 in the messages, 200 in the completion)');
  expect(upstream.refusals()[0].summarizer).toBe(true);
});

it('with nginx in front, a body over its limit gets the 413 page before vLLM counts anything', async () => {
  upstream = await startStandIn({ provider: 'windowed', window: WINDOW, bodyLimitBytes: 4_000 });
  const res = await post(bodyOf(1_001, { max_tokens: 10 }));
  expect(res.status).toBe(413);
  expect(res.type).toBe('text/html');
  expect(res.text).toContain('413 Request Entity Too Large');
  expect((await post(bodyOf(1_000, { max_tokens: 10 }))).status).toBe(200);
});

it('a scripted reply: a tool call as vLLM writes it, whole or streamed, the usage chunk only when asked for', async () => {
  upstream = await startStandIn({
    provider: 'windowed',
    window: WINDOW,
    reply: (n) => ({ text: `step ${n}`, call: { id: `call_${n}`, name: 'read', args: { path: `f${n}.ts` } } }),
  });
  const whole = JSON.parse((await post(bodyOf(100))).text);
  expect(whole.choices[0]).toEqual({
    index: 0,
    message: {
      role: 'assistant',
      content: 'step 1',
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read', arguments: '{"path":"f1.ts"}' } }],
    },
    logprobs: null,
    finish_reason: 'tool_calls',
  });
  expect(whole.usage.prompt_tokens).toBe(100);
  const events = async (extra: Record<string, unknown>) =>
    (await post(bodyOf(100, { stream: true, ...extra }))).text
      .split('\n\n')
      .filter(Boolean)
      .map((e) => e.replace(/^data: /, ''));
  const plain = await events({});
  expect(plain.at(-1)).toBe('[DONE]');
  const chunks = plain.slice(0, -1).map((e) => JSON.parse(e));
  expect(chunks.map((c) => c.choices[0]?.delta)).toEqual([
    { role: 'assistant', content: '' },
    { content: 'step 2' },
    { tool_calls: [{ index: 0, id: 'call_2', type: 'function', function: { name: 'read', arguments: '{"path":"f2.ts"}' } }] },
    {},
  ]);
  expect(chunks.at(-1).choices[0].finish_reason).toBe('tool_calls');
  const withUsage = (await events({ stream_options: { include_usage: true } })).slice(0, -1).map((e) => JSON.parse(e));
  expect(withUsage.at(-1)).toMatchObject({
    choices: [],
    usage: { prompt_tokens: Math.ceil(Buffer.byteLength(bodyOf(100, { stream: true, stream_options: { include_usage: true } })) / 4) },
  });
});

describe("GET /v1/models: vLLM's model card", () => {
  const card = async () => {
    const res = await fetch(`${upstream.baseUrl}/models`);
    return { status: res.status, type: res.headers.get('content-type'), json: (await res.json()) as any };
  };

  it('lists the served model with max_model_len = the window, as vLLM writes its ModelCard', async () => {
    upstream = await startStandIn({ provider: 'windowed', window: WINDOW, model: 'Qwen/Qwen3-8B' });
    const res = await card();
    expect(res.status).toBe(200);
    expect(res.type).toBe('application/json');
    expect(res.json.object).toBe('list');
    expect(res.json.data).toHaveLength(1);
    const [model] = res.json.data;
    expect(Object.keys(model)).toEqual(['id', 'object', 'created', 'owned_by', 'root', 'parent', 'max_model_len', 'permission']);
    expect(model).toMatchObject({
      id: 'Qwen/Qwen3-8B',
      object: 'model',
      owned_by: 'vllm',
      root: 'Qwen/Qwen3-8B',
      parent: null,
      max_model_len: 1500,
    });
    expect(Number.isInteger(model.created)).toBe(true);
    expect(model.permission).toHaveLength(1);
    const [permission] = model.permission;
    expect(permission.id).toMatch(/^modelperm-[0-9a-f]{32}$/);
    expect({ ...permission, id: undefined, created: undefined }).toEqual({
      id: undefined,
      object: 'model_permission',
      created: undefined,
      allow_create_engine: false,
      allow_sampling: true,
      allow_logprobs: true,
      allow_search_indices: false,
      allow_view: true,
      allow_fine_tuning: false,
      organization: '*',
      group: null,
      is_blocking: false,
    });
    // Discovery is not a completion call.
    expect(upstream.calls()).toEqual([]);
  });

  it("defaults to 'fake-model'; a served name differs from the model path in root", async () => {
    upstream = await startStandIn({ provider: 'windowed', window: 4_096 });
    expect((await card()).json.data[0]).toMatchObject({ id: 'fake-model', root: 'fake-model', max_model_len: 4_096 });
    await upstream.close();
    upstream = await startStandIn({ provider: 'windowed', window: 4_096, model: 'coder', modelPath: '/models/Qwen3-8B' });
    expect((await card()).json.data[0]).toMatchObject({ id: 'coder', root: '/models/Qwen3-8B' });
  });
});
