import { afterEach, expect, it } from 'vitest';
import { startFakeUpstream, streamEvents, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest } from '../helpers/rescue.js';

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await upstream.close();
});

const inBandOverflow =
  'data: {"error":{"message":"This model\'s maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","code":"context_length_exceeded"}}\n\n';

it('a stream that fails after its first chunk reached the client is not replayed', async () => {
  upstream = await startFakeUpstream(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(streamEvents(['partial'])[0]);
    await new Promise((r) => setTimeout(r, 50));
    res.write(inBandOverflow);
    res.end();
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...agentRequest(60), stream: true }),
  });
  const text = await res.text();
  expect(res.status).toBe(200);
  expect(res.headers.get('x-gateway-compaction')).toBeNull();
  // Relayed as the upstream sent it, error event included.
  expect(text).toBe(streamEvents(['partial'])[0] + inBandOverflow);
  expect(upstream.received).toHaveLength(1);
});

it('a stream reset after its first chunk is not replayed; the client sees the cut', async () => {
  upstream = await startFakeUpstream(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(streamEvents(['partial'])[0]);
    await new Promise((r) => setTimeout(r, 50));
    res.destroy();
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...agentRequest(60), stream: true }),
  });
  expect(res.status).toBe(200);
  await expect(res.text()).rejects.toThrow();
  expect(upstream.received).toHaveLength(1);
  // and the gateway is still fine
  upstream.handle(async (_req, r) => {
    r.writeHead(200, { 'content-type': 'text/event-stream' });
    r.end(streamEvents(['ok']).join(''));
  });
  const next = await fetch(`${gateway.baseUrl}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"m","messages":[]}' });
  expect(await next.text()).toContain('[DONE]');
});
