import { afterEach, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { event, message, promptTooLong, startAnthropic, streamOf } from '../helpers/anthropic.js';
import { claudeRequest } from '../helpers/claude-request.js';

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

const request = JSON.stringify({ ...claudeRequest(), stream: true });
const post = () => fetch(`${gateway.origin}/v1/messages?beta=true`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-x' }, body: request });

/** Rejects after `ms`: every wait in these tests is bounded. */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

it('a stream whose content started is never replayed: the client has it before the upstream fails', async () => {
  let clientSawContent!: () => void;
  const contentArrived = new Promise<void>((resolve) => (clientSawContent = resolve));
  const started = [streamOf(message('', 10))[0], event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } })];
  const failure = `event: error\ndata: ${JSON.stringify(promptTooLong(30_000, 20_000))}\n\n`;
  upstream = await startFakeUpstream(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of started) res.write(e);
    // The error is only sent once the client holds content_block_start: the gateway has committed.
    await within(5_000, 'the client to receive content_block_start', contentArrived);
    res.end(failure);
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });

  const res = await within(5_000, 'response headers', post());
  expect(res.status).toBe(200);
  expect(res.headers.get('x-gateway-compaction')).toBeNull();
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes('content_block_start')) {
    const { value, done } = await within(5_000, 'content_block_start at the client', reader.read());
    if (done) throw new Error(`stream ended early: ${text}`);
    text += decoder.decode(value, { stream: true });
  }
  clientSawContent();
  for (;;) {
    const { value, done } = await within(5_000, 'the rest of the stream', reader.read());
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  // Relayed as sent, the error event included; no second call upstream.
  expect(text).toBe(started.join('') + failure);
  expect(upstream.received).toHaveLength(1);
});

it('an error after message_start and ping, before any content, is rescued: the client sees only the replay', async () => {
  const anthropic = await startAnthropic({ style: 'sse_error', limitBytes: Math.floor(request.length / 2) });
  upstream = anthropic;
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const res = await within(10_000, 'the rescued answer', post());
  const text = await within(5_000, 'the rescued stream', res.text());
  expect(res.status).toBe(200);
  expect(res.headers.get('x-gateway-compaction')).toMatch(/^outcome=replayed, trigger=rejected, reason=context_length/);
  const calls = anthropic.messageCalls();
  expect(calls).toHaveLength(2);
  // The held message_start of the refused attempt never reached the client.
  expect(text).toBe(streamOf(message('rescued answer', Math.ceil(calls[1].body.length / 4))).join(''));
});
