import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { expectValidMessagesReplay } from '../helpers/anthropic.js';
import type { Received } from '../helpers/fake-upstream.js';
import { startGateway, postChat, postJson, type Posted, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type Scripted, type StandIn, type TooLong } from '../helpers/provider.js';
import { agentRequest, expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';
import { total } from '../helpers/exposition.js';

let provider: StandIn;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

const LIMIT = 60_000;

/** How the stand-in says "too long" to the client's request: one of its ways, or a scripted answer (a JSON 413 states no window). */
type Refusal = { tooLong: TooLong } | { scripted: Scripted };
const JSON_413: Scripted = { status: 413, json: { error: { type: 'request_too_large', message: 'Request exceeds the maximum size' } } };

/** The status the client's request got: a 413, a 400, or (streamed, in_stream) a 200 whose stream holds the error. */
function refusedWith(refusal: Refusal, stream: boolean): number {
  if ('scripted' in refusal || refusal.tooLong === 'page') return 413;
  return stream && refusal.tooLong === 'in_stream' ? 200 : 400;
}
/** What the rules said of the client's request and of the replay; a scripted refusal is not theirs. */
const verdictsOf = (refusal: Refusal) =>
  'scripted' in refusal ? [null] : [expect.stringMatching(/maximum context length|prompt is too long|413 Request Entity Too Large/), null];

async function setup(refusal: Refusal) {
  provider = await startStandIn({
    limitBytes: LIMIT,
    tooLong: 'tooLong' in refusal ? refusal.tooLong : 'stated',
    reply: () => ({ text: 'rescued answer' }),
  });
  if ('scripted' in refusal) provider.script(refusal.scripted);
  // A summarizer window of its own wide enough for the whole middle; the summarizer here is the
  // upstream's own model, so where the error states its window, its calls are sized to that.
  gateway = await startGateway({
    upstream: { url: provider.baseUrl },
    summarizer: { maxInputTokens: 500_000 },
    auth: { metricsModelNames: true },
  });
}

/** The same agent conversation as Anthropic Messages: system apart, tool_use / tool_result blocks, each round's results in one user turn. */
function asMessages(chat: ReturnType<typeof agentRequest>): Record<string, any> {
  const [system, ...rest] = chat.messages as any[];
  const messages: any[] = [];
  const part = (p: any) => {
    if (p.type === 'text') return { type: 'text', text: p.text };
    const [, mediaType, data] = /^data:([^;]+);base64,(.*)$/.exec(p.image_url.url)!;
    return { type: 'image', source: { type: 'base64', media_type: mediaType, data } };
  };
  for (const m of rest) {
    if (m.role === 'tool') {
      const result = { type: 'tool_result', tool_use_id: m.tool_call_id, content: m.content };
      const last = messages.at(-1);
      if (last?.role === 'user' && last.content.every((b: any) => b.type === 'tool_result')) last.content.push(result);
      else messages.push({ role: 'user', content: [result] });
    } else if (m.role === 'assistant') {
      const content: any[] = [];
      if (m.reasoning_content) content.push({ type: 'text', text: m.reasoning_content });
      if (m.content) content.push({ type: 'text', text: m.content });
      for (const c of m.tool_calls ?? [])
        content.push({ type: 'tool_use', id: c.id, name: c.function.name, input: JSON.parse(c.function.arguments) });
      messages.push({ role: 'assistant', content });
    } else {
      messages.push({ role: 'user', content: typeof m.content === 'string' ? m.content : m.content.map(part) });
    }
  }
  const tools = (chat.tools as any[]).map((t) => ({
    name: t.function.name,
    description: t.function.description,
    input_schema: t.function.parameters,
  }));
  return { model: chat.model, system: system.content, messages, tools, max_tokens: chat.max_tokens, temperature: chat.temperature };
}

/** What the rows need of the API the agent speaks. */
interface Dialect {
  api: 'chat' | 'messages';
  request(): Record<string, any>;
  post(body: Record<string, any>): Promise<Posted>;
  answerText(json: any): string;
  /** The request streamed through the API's SDK: the text, the output tokens of its usage, and the header. */
  stream(body: Record<string, any>): Promise<{ text: string; usage: number; header: string | null }>;
  expectValidReplay(rejected: Received, replay: Received): void;
}

const CHAT: Dialect = {
  api: 'chat',
  request: () => agentRequest(60),
  post: (body) => postChat(gateway, body, { authorization: 'Bearer sk-client' }),
  answerText: (json) => json.choices[0].message.content,
  async stream(body) {
    const sdk = new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'sk-client', maxRetries: 0 });
    const { data: stream, response } = await sdk.chat.completions
      .create({ ...(body as any), stream: true, stream_options: { include_usage: true } })
      .withResponse();
    const chunks = [];
    for await (const chunk of stream as any) chunks.push(chunk);
    return {
      text: chunks.map((c: any) => c.choices[0]?.delta?.content ?? '').join(''),
      usage: chunks.at(-1).usage.total_tokens,
      header: response.headers.get('x-gateway-compaction'),
    };
  },
  expectValidReplay,
};

const MESSAGES: Dialect = {
  api: 'messages',
  request: () => asMessages(agentRequest(60)),
  post: (body) => postJson(`${gateway.baseUrl}/messages`, body, { 'x-api-key': 'sk-client', 'anthropic-version': '2023-06-01' }),
  answerText: (json) =>
    json.content
      .filter((b: any) => b.type === 'text')
      .map((b: any) => b.text)
      .join(''),
  async stream(body) {
    const sdk = new Anthropic({ baseURL: gateway.origin, apiKey: 'sk-client', maxRetries: 0 });
    const { data: stream, response } = await sdk.messages.stream(body as any).withResponse();
    let text = '';
    stream.on('text', (t) => (text += t));
    const message = await stream.finalMessage();
    return { text, usage: message.usage.output_tokens, header: response.headers.get('x-gateway-compaction') };
  },
  expectValidReplay: expectValidMessagesReplay,
};

describe.each<[string, Dialect, Refusal, string]>([
  ['a JSON 413', CHAT, { scripted: JSON_413 }, 'body_too_large'],
  ['an edge\u2019s 413 page', CHAT, { tooLong: 'page' }, 'body_too_large'],
  ['a chat completions 400 stating the window', CHAT, { tooLong: 'stated' }, 'context_length'],
  ['a Messages 400 stating the window', MESSAGES, { tooLong: 'stated' }, 'context_length'],
  ['an error inside a 200 stream', CHAT, { tooLong: 'in_stream' }, 'context_length'],
])('an overlong rejection (%s)', (_name, dialect, refusal, reason) => {
  it('costs one compaction and one replay; the client gets 200, the answer and the header', async () => {
    await setup(refusal);
    const body = dialect.request();
    expect(JSON.stringify(body).length).toBeGreaterThan(LIMIT);
    const res = await dialect.post(body);

    expect(res.status).toBe(200);
    expect(dialect.answerText(res.json)).toBe('rescued answer');
    expect(res.text).not.toMatch(/context length|too large|Too Large|too long/i);
    const calls = provider.calls(dialect.api);
    expect(calls).toHaveLength(2);
    expect(provider.calls()).toHaveLength(2);
    // The client's request refused (by the script, or by the rules for its size), the replay taken by the rules.
    expect(provider.answerStatus(calls[0])).toBe(refusedWith(refusal, false));
    expect(provider.verdicts(dialect.api)).toEqual(verdictsOf(refusal));
    dialect.expectValidReplay(calls[0], calls[1]);
    expect(calls[1].body.length).toBeLessThanOrEqual(LIMIT);

    const header = parseCompactionHeader(res.headers.get('x-gateway-compaction'));
    expect(header).toMatchObject({ outcome: 'replayed', reason });
    // Masking every older output leaves this history (long assistant turns) far over a stated
    // 15,000-token window: it is summarised.
    if (reason === 'context_length') expect(header.strategy).toBe('summarize');
    const summarizer = provider.summarizerCalls();
    if (header.strategy === 'mask') {
      expect(summarizer).toHaveLength(0);
      expect(header['summarizer-ms']).toBeUndefined();
    } else {
      expect(header.strategy).toBe('summarize');
      expect(summarizer.length).toBeGreaterThanOrEqual(1);
      // Sized to what the rejection taught of the upstream's own model: under the stated window,
      // or under the refused size.
      for (const call of summarizer)
        expect(call.body.length).toBeLessThanOrEqual(reason === 'context_length' ? LIMIT : calls[0].body.length - 1);
      // ... and each answered by the strict rules.
      expect(summarizer.map((call) => provider.answerStatus(call))).toEqual(summarizer.map(() => 200));
      expect(header['summarizer-ms']).toBeGreaterThanOrEqual(0);
    }
    expect(header['messages-before']).toBe(body.messages.length);
    expect(header['messages-after']).toBe(calls[1].json.messages.length);
    expect(header['bytes-before']).toBe(calls[0].body.length);
    expect(header['bytes-after']).toBe(calls[1].body.length);
    expect(Number(header['tokens-after'])).toBeLessThan(Number(header['tokens-before']));

    const warn = gateway.logLines().filter((l) => l.level === 40 && /overlong/.test(l.msg));
    expect(warn).toHaveLength(1);
    expect(warn[0].msg).toMatch(
      new RegExp(`compacted \\d+ items into \\d+ \\(.+ -> .+, ${header.strategy}\\b.*\\), replayed once: the upstream answered 200`),
    );
  });

  it('rescues a streaming request: the replayed stream reaches the client intact', async () => {
    await setup(refusal);
    const streamed = await dialect.stream(dialect.request());
    expect(streamed.text).toBe('rescued answer');
    expect(streamed.usage).toBeGreaterThan(0);
    expect(parseCompactionHeader(streamed.header).outcome).toBe('replayed');
    const calls = provider.calls(dialect.api);
    expect(calls).toHaveLength(2);
    expect(provider.calls()).toHaveLength(2);
    expect(provider.answerStatus(calls[0])).toBe(refusedWith(refusal, true));
    expect(provider.verdicts(dialect.api)).toEqual(verdictsOf(refusal));
    expect(calls[1].json.stream).toBe(true);
    if (dialect.api === 'chat') expect(calls[1].json.stream_options).toEqual({ include_usage: true });
    dialect.expectValidReplay(calls[0], calls[1]);
  });
});

it('counts the rescue in metrics', async () => {
  await setup({ tooLong: 'stated' });
  await postChat(gateway, agentRequest(60));
  const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
  expect(metrics).toMatch(/gateway_overlong_rejections_total\{api="chat",reason="context_length",upstream="default"\} 1/);
  expect(metrics).toMatch(/gateway_compactions_total\{api="chat",strategy="summarize",outcome="replayed",upstream="default"\} 1/);
  expect(metrics).toMatch(/gateway_replays_total\{api="chat",result="success",upstream="default"\} 1/);
  // Each call sized to the window the error stated: several for this history.
  const summarizerCalls = provider.summarizerCalls().length;
  expect(summarizerCalls).toBeGreaterThanOrEqual(1);
  // Under the request's upstream and the model its summarizer calls named (the request's own).
  expect(metrics).toContain(
    `gateway_summarizer_calls_total{upstream="default",model="${provider.summarizerCalls()[0].json.model}"} ${summarizerCalls}\n`,
  );
  expect(total(metrics, 'gateway_summarizer_calls_total')).toBe(summarizerCalls);
  const [rejected, replay] = provider.calls('chat');
  expect(metrics).toContain(`gateway_compaction_removed_bytes_total{api="chat"} ${rejected.body.length - replay.body.length}\n`);
  expect(metrics).toMatch(/gateway_compaction_duration_seconds_count 1/);
  expect(metrics).toMatch(/gateway_compaction_request_bytes_count\{stage="after"\} 1/);
});
