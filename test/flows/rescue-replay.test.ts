import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, postChat, type TestGateway } from '../helpers/gateway.js';
import { startProvider, type FakeProvider, type RejectStyle } from '../helpers/provider.js';
import { agentRequest, expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';

let provider: FakeProvider;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

const LIMIT = 60_000;

async function setup(style: RejectStyle) {
  provider = await startProvider({ limitBytes: LIMIT, style });
  // A summarizer window of its own wide enough for the whole middle; the summarizer here is the
  // upstream's own model, so where the error states its window, its calls are sized to that.
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
}

describe.each<[RejectStyle, string]>([
  ['json_413', 'body_too_large'],
  ['nginx_413', 'body_too_large'],
  ['openai_400', 'context_length'],
  ['anthropic_400', 'context_length'],
  ['sse_in_band', 'context_length'],
])('an overlong rejection (%s)', (style, reason) => {
  it('costs one compaction and one replay; the client gets 200, the answer and the header', async () => {
    await setup(style);
    const body = agentRequest(60);
    expect(JSON.stringify(body).length).toBeGreaterThan(LIMIT);
    const res = await postChat(gateway, body, { authorization: 'Bearer sk-client' });

    expect(res.status).toBe(200);
    expect(res.json.choices[0].message.content).toBe('rescued answer');
    expect(res.text).not.toMatch(/context length|too large|Too Large/i);
    const calls = provider.chatCalls();
    expect(calls).toHaveLength(2);
    expectValidReplay(calls[0], calls[1]);
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
      for (const call of summarizer) expect(call.body.length).toBeLessThanOrEqual(reason === 'context_length' ? LIMIT : calls[0].body.length - 1);
      expect(header['summarizer-ms']).toBeGreaterThanOrEqual(0);
    }
    expect(header['messages-before']).toBe(body.messages.length);
    expect(header['messages-after']).toBe(calls[1].json.messages.length);
    expect(header['bytes-before']).toBe(calls[0].body.length);
    expect(header['bytes-after']).toBe(calls[1].body.length);
    expect(Number(header['tokens-after'])).toBeLessThan(Number(header['tokens-before']));

    const warn = gateway.logLines().filter((l) => l.level === 40 && /overlong/.test(l.msg));
    expect(warn).toHaveLength(1);
    expect(warn[0].msg).toMatch(new RegExp(`compacted \\d+ items into \\d+ \\(.+ -> .+, ${header.strategy}\\b.*\\), replaying once`));
  });

  it('rescues a streaming request: the replayed stream reaches the client intact', async () => {
    await setup(style);
    const sdk = new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'sk-client', maxRetries: 0 });
    const { data: stream, response } = await sdk.chat.completions
      .create({ ...(agentRequest(60) as any), stream: true, stream_options: { include_usage: true } })
      .withResponse();
    const chunks = [];
    for await (const chunk of stream as any) chunks.push(chunk);
    expect(chunks.map((c: any) => c.choices[0]?.delta?.content ?? '').join('')).toBe('rescued answer');
    expect(chunks.at(-1).usage.total_tokens).toBeGreaterThan(0);
    expect(parseCompactionHeader(response.headers.get('x-gateway-compaction')).outcome).toBe('replayed');
    const calls = provider.chatCalls();
    expect(calls).toHaveLength(2);
    expect(calls[1].json.stream).toBe(true);
    expect(calls[1].json.stream_options).toEqual({ include_usage: true });
    expectValidReplay(calls[0], calls[1]);
  });
});

it('counts the rescue in metrics', async () => {
  await setup('openai_400');
  await postChat(gateway, agentRequest(60));
  const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
  expect(metrics).toMatch(/gateway_overlong_rejections_total\{api="chat",reason="context_length",upstream="default"\} 1/);
  expect(metrics).toMatch(/gateway_compactions_total\{api="chat",strategy="summarize",outcome="replayed",upstream="default"\} 1/);
  expect(metrics).toMatch(/gateway_replays_total\{api="chat",result="success",upstream="default"\} 1/);
  // Each call sized to the window the error stated: several for this history.
  const summarizerCalls = provider.summarizerCalls().length;
  expect(summarizerCalls).toBeGreaterThanOrEqual(1);
  expect(metrics).toContain(`gateway_summarizer_calls_total ${summarizerCalls}\n`);
  const [rejected, replay] = provider.chatCalls();
  expect(metrics).toContain(`gateway_compaction_removed_bytes_total{api="chat"} ${rejected.body.length - replay.body.length}\n`);
  expect(metrics).toMatch(/gateway_compaction_duration_seconds_count 1/);
  expect(metrics).toMatch(/gateway_compaction_request_bytes_count\{stage="after"\} 1/);
});
