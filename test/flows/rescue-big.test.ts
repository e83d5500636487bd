import { afterEach, expect, it } from 'vitest';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { agentRequest, expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';

let provider: StandIn;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

it('a middle bigger than summarizer.maxInputTokens is chunked, then one replay', async () => {
  provider = await startStandIn({ limitBytes: 60_000 });
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
  // ... and the strict rules answered each one.
  expect(summaries.map((call) => provider.answerStatus(call))).toEqual(summaries.map(() => 200));
  expect(provider.calls('chat')).toHaveLength(2);
  expect(provider.verdicts('chat')).toEqual([expect.stringMatching(/maximum context length/), null]);
  expectValidReplay(provider.calls('chat')[0], provider.calls('chat')[1]);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction')).strategy).toBe('summarize');
});

it('a single 5 MB tool output in the tail is shrunk and the replay fits', async () => {
  provider = await startStandIn({ limitBytes: 1_000_000 });
  // The provider's own JSON 413, which states no window, for the client's request; the rules (and
  // their window of 1 MB) for every call after it.
  provider.script({ status: 413, json: { error: { type: 'request_too_large', message: 'Request exceeds the maximum size' } } });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
  const body = agentRequest(40);
  const last = body.messages.at(-1)!;
  expect(last.role).toBe('tool');
  last.content = `BEGIN-OF-OUTPUT\n${'log line with details\n'.repeat(250_000)}END-OF-OUTPUT`;
  const res = await postChat(gateway, body);
  expect(res.status).toBe(200);
  expect(provider.calls('chat')).toHaveLength(2);
  const [rejected, replay] = provider.calls('chat');
  expect(provider.answerStatus(rejected)).toBe(413);
  // The replay was answered by the rules: taken, under their window.
  expect(provider.verdicts('chat')).toEqual([null]);
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
  provider = await startStandIn({ limitBytes: 2_000_000, tooLong: 'page' });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, compaction: { strategy: 'fallback', mask: false } });
  const body = agentRequest(650, {}, 7_000);
  const res = await postChat(gateway, body);
  expect(res.status).toBe(200);
  expect(provider.calls('chat')).toHaveLength(2);
  const [rejected, replay] = provider.calls('chat');
  expect(provider.verdicts('chat')).toEqual(['413 Request Entity Too Large', null]);
  expect(rejected.body.length).toBeGreaterThan(5_000_000);
  expect(rejected.json.messages.length).toBeGreaterThan(1_500);
  expectValidReplay(rejected, replay);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction')).strategy).toBe('fallback');
  expect(provider.summarizerCalls()).toEqual([]);
});

it('the same history compacts by masking its old tool outputs, by default', async () => {
  provider = await startStandIn({ limitBytes: 2_000_000, tooLong: 'page' });
  gateway = await startGateway({ upstream: { url: provider.baseUrl } });
  const res = await postChat(gateway, agentRequest(650, {}, 7_000));
  expect(res.status).toBe(200);
  expect(provider.calls('chat')).toHaveLength(2);
  const [rejected, replay] = provider.calls('chat');
  expect(provider.verdicts('chat')).toEqual(['413 Request Entity Too Large', null]);
  expect(replay.body.length).toBeLessThanOrEqual(2_000_000);
  expectValidReplay(rejected, replay);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction')).strategy).toBe('mask');
  expect(provider.summarizerCalls()).toEqual([]);
});
