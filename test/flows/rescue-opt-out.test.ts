import { afterEach, expect, it } from 'vitest';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startProvider, type FakeProvider } from '../helpers/provider.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';

let provider: FakeProvider;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

it('x-gateway-compaction: off passes the original error through untouched', async () => {
  provider = await startProvider({ limitBytes: 60_000, style: 'openai_400' });
  gateway = await startGateway({ upstream: { url: provider.baseUrl } });
  const res = await postChat(gateway, agentRequest(60), { 'x-gateway-compaction': 'off' });
  expect(res.status).toBe(400);
  expect(res.json.error.code).toBe('context_length_exceeded');
  expect(provider.chatCalls()).toHaveLength(1);
  expect(provider.summarizerCalls()).toHaveLength(0);
  // The opt-out itself is never forwarded upstream.
  expect(provider.chatCalls()[0].headers['x-gateway-compaction']).toBeUndefined();
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'disabled', reason: 'context_length' });
});

it('compaction.maxReplays: 0 turns the rescue off', async () => {
  provider = await startProvider({ limitBytes: 60_000, style: 'json_413' });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, compaction: { maxReplays: 0 } });
  const res = await postChat(gateway, agentRequest(60));
  expect(res.status).toBe(413);
  expect(provider.chatCalls()).toHaveLength(1);
  expect(provider.summarizerCalls()).toHaveLength(0);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction')).outcome).toBe('disabled');
});
