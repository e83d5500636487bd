import { afterAll, beforeAll, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, streamEvents, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';

let upstream: FakeUpstream;
let gateway: TestGateway;
beforeAll(async () => {
  upstream = await startFakeUpstream(async (req, res) => {
    if (req.json?.cut) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(streamEvents(['partial'])[0]);
      await new Promise((r) => setTimeout(r, 30));
      res.destroy();
      return;
    }
    json(res, 200, completion('ok'));
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
});
afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

const completed = () => gateway.logLines().filter((l) => l.msg === 'request completed');

it('writes one line per request with the upstream figures', async () => {
  const before = completed().length;
  await postChat(gateway, { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, { 'x-request-id': 'req-abc-123' });
  const lines = completed().slice(before);
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({
    level: 30,
    requestId: 'req-abc-123',
    method: 'POST',
    path: '/v1/chat/completions',
    status: 200,
    upstreamStatus: 200,
    streamed: false,
  });
  expect(lines[0].durationMs).toBeGreaterThanOrEqual(0);
  expect(lines[0].upstreamTtfbMs).toBeGreaterThanOrEqual(0);
});

it('logs health probes and scrapes at debug, not info', async () => {
  const before = completed().length;
  await fetch(`${gateway.origin}/healthz`);
  await fetch(`${gateway.origin}/metrics`);
  expect(completed().slice(before)).toHaveLength(0);
});

it('says the upstream cut a started stream, not that the client left', async () => {
  const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, cut: true, messages: [] }),
  });
  await res.text().catch(() => undefined);
  await expect.poll(() => gateway.logLines().some((l) => /cut the connection after 200 was sent/.test(l.msg))).toBe(true);
  expect(gateway.logLines().some((l) => /client disconnected/.test(l.msg))).toBe(false);
});
