import { afterEach, expect, it } from 'vitest';
import { json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest, expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await upstream.close();
});

const overlong = (n: number) =>
  `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in ${n} tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`;

it('an upstream that keeps rejecting: two calls, then its own error with outcome=replay_failed', async () => {
  let n = 0;
  upstream = await startFakeUpstream((req, res) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer')
      return json(res, 200, { choices: [{ message: { content: 'short summary' } }] });
    n++;
    return json(res, 400, overlong(20_000 + n), { 'x-attempt': String(n) });
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const res = await postChat(gateway, agentRequest(60));
  const chat = upstream.received.filter((r) => r.headers['x-gateway-compaction'] !== 'summarizer');
  expect(chat).toHaveLength(2);
  expectValidReplay(chat[0], chat[1]);
  // The replay's own answer, byte for byte, with the header saying what happened.
  expect(res.status).toBe(400);
  expect(res.text).toBe(overlong(20_002));
  expect(res.headers.get('x-attempt')).toBe('2');
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({
    outcome: 'replay_failed',
    reason: 'context_length',
    'replay-status': 400,
  });
  const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
  expect(metrics).toMatch(/gateway_replays_total\{api="chat",result="still_overlong",upstream="default"\} 1/);
  expect(metrics).toMatch(/gateway_compactions_total\{api="chat",strategy="summarize",outcome="replay_failed",upstream="default"\} 1/);
});

it('a replay answered with a 500 is relayed as it came', async () => {
  let n = 0;
  upstream = await startFakeUpstream((req, res) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer') return json(res, 200, { choices: [{ message: { content: 'sum' } }] });
    n++;
    return n === 1 ? json(res, 400, overlong(20_000)) : json(res, 500, '{"error":{"message":"boom"}}');
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const res = await postChat(gateway, agentRequest(60));
  expect(res.status).toBe(500);
  expect(res.text).toBe('{"error":{"message":"boom"}}');
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replay_failed', 'replay-status': 500 });
});

it('a request that cannot be shrunk gets the original error and outcome=not_shrunk', async () => {
  upstream = await startFakeUpstream((_req, res) => json(res, 400, overlong(90_000)));
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const body = {
    model: 'm',
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'x'.repeat(300_000) },
    ],
  };
  const res = await postChat(gateway, body);
  expect(res.status).toBe(400);
  expect(res.text).toBe(overlong(90_000));
  expect(upstream.received).toHaveLength(1);
  const header = parseCompactionHeader(res.headers.get('x-gateway-compaction'));
  expect(header.outcome).toBe('not_shrunk');
  expect(['nothing_to_shrink', 'cannot_fit']).toContain(header.why);
});
