import { afterEach, expect, it } from 'vitest';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startProvider, type FakeProvider } from '../helpers/provider.js';
import { agentRequest, expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';

let provider: FakeProvider;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

it('a middle bigger than summarizer.maxInputTokens is chunked, then one replay', async () => {
  provider = await startProvider({ limitBytes: 60_000 });
  gateway = await startGateway({
    upstream: { url: provider.baseUrl },
    summarizer: { maxInputTokens: 8_000, maxSummaryTokens: 200 },
    // Masking off: the summarizer condenses the middle.
    compaction: { mask: false },
  });
  const res = await postChat(gateway, agentRequest(60));
  expect(res.status).toBe(200);
  const summaries = provider.summarizerCalls();
  expect(summaries.length).toBeGreaterThan(2);
  // every summarizer call fits its window (3 chars per token, as the gateway assumes)
  for (const call of summaries) expect(call.body.length).toBeLessThan(8_000 * 3);
  expect(provider.chatCalls()).toHaveLength(2);
  expectValidReplay(provider.chatCalls()[0], provider.chatCalls()[1]);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction')).strategy).toBe('summarize');
});

it('a single 5 MB tool output in the tail is shrunk and the replay fits', async () => {
  provider = await startProvider({ limitBytes: 1_000_000, style: 'json_413' });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
  const body = agentRequest(40);
  const last = body.messages.at(-1)!;
  expect(last.role).toBe('tool');
  last.content = `BEGIN-OF-OUTPUT\n${'log line with details\n'.repeat(250_000)}END-OF-OUTPUT`;
  const res = await postChat(gateway, body);
  expect(res.status).toBe(200);
  const [rejected, replay] = provider.chatCalls();
  expect(rejected.body.length).toBeGreaterThan(5_000_000);
  expect(replay.body.length).toBeLessThanOrEqual(1_000_000);
  expectValidReplay(rejected, replay);
  const cut = replay.json.messages.at(-1).content as string;
  expect(cut.startsWith('BEGIN-OF-OUTPUT')).toBe(true);
  expect(cut.endsWith('END-OF-OUTPUT')).toBe(true);
  expect(cut).toMatch(/characters cut by compaction-gateway/);
  expect(replay.json.messages.at(-1).tool_call_id).toBe(last.tool_call_id);
});

it('a 7 MB, 2,000-message history compacts under a 413 with the fallback', async () => {
  provider = await startProvider({ limitBytes: 2_000_000, style: 'nginx_413' });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, compaction: { strategy: 'fallback', mask: false } });
  const body = agentRequest(650, {}, 7_000);
  const res = await postChat(gateway, body);
  expect(res.status).toBe(200);
  const [rejected, replay] = provider.chatCalls();
  expect(rejected.body.length).toBeGreaterThan(5_000_000);
  expect(rejected.json.messages.length).toBeGreaterThan(1_500);
  expectValidReplay(rejected, replay);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction')).strategy).toBe('fallback');
  expect(provider.summarizerCalls()).toEqual([]);
});

it('the same history compacts by masking its old tool outputs, by default', async () => {
  provider = await startProvider({ limitBytes: 2_000_000, style: 'nginx_413' });
  gateway = await startGateway({ upstream: { url: provider.baseUrl } });
  const res = await postChat(gateway, agentRequest(650, {}, 7_000));
  expect(res.status).toBe(200);
  const [rejected, replay] = provider.chatCalls();
  expect(replay.body.length).toBeLessThanOrEqual(2_000_000);
  expectValidReplay(rejected, replay);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction')).strategy).toBe('mask');
  expect(provider.summarizerCalls()).toEqual([]);
});
