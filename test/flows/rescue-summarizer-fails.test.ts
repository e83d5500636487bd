import { freePort } from '../helpers/ports.js';
import { afterEach, expect, it } from 'vitest';
import { json } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startProvider, type FakeProvider } from '../helpers/provider.js';
import { agentRequest, expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';

let provider: FakeProvider;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

async function deadUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}/v1`;
}

async function expectFallbackReplay(failure: string) {
  const res = await postChat(gateway, agentRequest(60));
  expect(res.status).toBe(200);
  expect(res.json.choices[0].message.content).toBe('rescued answer');
  const calls = provider.chatCalls();
  expect(calls).toHaveLength(2);
  expectValidReplay(calls[0], calls[1]);
  const header = parseCompactionHeader(res.headers.get('x-gateway-compaction'));
  expect(header).toMatchObject({ outcome: 'replayed', strategy: 'fallback', 'summarizer-failure': failure });
  const summary = calls[1].json.messages.find((m: any) => typeof m.content === 'string' && m.content.startsWith('[compaction-gateway]'));
  expect(summary).toBeDefined();
  const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
  expect(metrics).toContain(`gateway_summarizer_failures_total{kind="${failure}"} 1`);
}

it('summarizer down: the fallback compacts and the replay still happens', async () => {
  provider = await startProvider({ limitBytes: 60_000 });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { url: await deadUrl() } });
  await expectFallbackReplay('unreachable');
});

it('summarizer hanging past its timeout: the fallback compacts and the replay still happens', async () => {
  provider = await startProvider({ limitBytes: 60_000, summarizer: () => new Promise(() => {}) });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { timeoutMs: 300, maxInputTokens: 500_000 } });
  await expectFallbackReplay('timeout');
});

it('summarizer answering an error: the fallback takes over', async () => {
  provider = await startProvider({ limitBytes: 60_000, summarizer: (_req, res) => json(res, 503, { error: { message: 'overloaded' } }) });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
  await expectFallbackReplay('rejected');
});

it('summarizer answering garbage: the fallback takes over', async () => {
  provider = await startProvider({ limitBytes: 60_000, summarizer: (_req, res) => json(res, 200, '{"choices":[]}') });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
  await expectFallbackReplay('bad_response');
});

it('compaction.strategy: fallback never calls an LLM', async () => {
  provider = await startProvider({ limitBytes: 60_000 });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, compaction: { strategy: 'fallback' } });
  const res = await postChat(gateway, agentRequest(60));
  expect(res.status).toBe(200);
  expect(provider.summarizerCalls()).toHaveLength(0);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed', strategy: 'fallback' });
});
