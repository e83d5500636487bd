import { afterAll, beforeAll, expect, it } from 'vitest';
import { startFakeUpstream, streamEvents, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

let upstream: FakeUpstream;
let gateway: TestGateway;
let release: () => void;
const released = new Promise<void>((resolve) => (release = resolve));

beforeAll(async () => {
  const events = streamEvents(['first', 'second', 'third']);
  upstream = await startFakeUpstream(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(events[0]);
    res.write(events[1]);
    // Hold the rest back until the test has seen the first chunk arrive at the client.
    await released;
    for (const e of events.slice(2)) res.write(e);
    res.end();
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
});
afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

it('delivers the first chunk while the upstream still holds back the rest', async () => {
  const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let seen = '';
  while (!seen.includes('"first"')) {
    const { value, done } = await reader.read();
    expect(done).toBe(false);
    seen += decoder.decode(value, { stream: true });
  }
  // The upstream has not sent 'third' yet: the gateway did not wait for the end.
  expect(seen).not.toContain('"third"');
  release();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    seen += decoder.decode(value, { stream: true });
  }
  expect(seen).toContain('"third"');
  expect(seen.trimEnd().endsWith('data: [DONE]')).toBe(true);
});
