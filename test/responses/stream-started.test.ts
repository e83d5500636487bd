import { afterEach, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { event, failedInStream, preamble, responseObject, streamOf } from '../helpers/responses-provider.js';

/*
 * A Responses stream is held only while it is preamble (response.created, response.in_progress):
 * once an event that carries output has been relayed, nothing is replayed, ever.
 */

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

const body = JSON.stringify({ model: 'fake-model', stream: true, input: [{ type: 'message', role: 'user', content: 'hi' }] });

/** Reads a streamed answer event by event, resolving `seen(text)` once `text` has arrived. */
async function openStream(url: string) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const reader = res.body!.getReader();
  let received = '';
  const waiters: Array<[string, () => void]> = [];
  const pump = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      received += Buffer.from(value).toString('utf8');
      for (const [text, resolve] of waiters) if (received.includes(text)) resolve();
    }
  })();
  return {
    res,
    seen: (text: string) => new Promise<void>((resolve) => (received.includes(text) ? resolve() : waiters.push([text, resolve]))),
    all: async () => {
      await pump;
      return received;
    },
  };
}

it('after an output event reached the client, a later failure is relayed, never replayed', async () => {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  upstream = await startFakeUpstream(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const started = streamOf(['partial']).slice(0, 5);
    for (const e of started) res.write(e);
    await released;
    const failed = { ...responseObject('', 'failed'), error: { code: 'context_length_exceeded', message: 'Your input exceeds the context window of this model.' } };
    res.end(event('response.failed', { response: failed }, 9));
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const stream = await openStream(`${gateway.baseUrl}/responses`);
  // The client has the output before the upstream has even decided to fail.
  await stream.seen('"delta":"partial"');
  expect(stream.res.status).toBe(200);
  release();
  const text = await stream.all();
  expect(text).toContain('response.failed');
  expect(upstream.received).toHaveLength(1);
  expect(stream.res.headers.get('x-gateway-compaction')).toBeNull();
});

it('the preamble is held until the first output event, then everything is relayed in order, as it comes', async () => {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const events = streamOf(['a', 'b']);
  upstream = await startFakeUpstream(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of events.slice(0, 3)) res.write(e);
    await released;
    for (const e of events.slice(3)) res.write(e);
    res.end();
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const stream = await openStream(`${gateway.baseUrl}/responses`);
  // The first output event arrived: the held preamble and it are relayed before the rest exists.
  await stream.seen('response.output_item.added');
  release();
  expect(await stream.all()).toBe(events.join(''));
});

it('a stream that fails as overlong inside its preamble is judged; a one-message request cannot be compacted, so the failure is relayed byte for byte', async () => {
  upstream = await startFakeUpstream((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (req.headers['x-gateway-compaction'] === 'summarizer') {
      res.end();
      return;
    }
    res.end((req.headers['x-gateway-compaction'] ? streamOf(['ok']) : failedInStream()).join(''));
  });
  // Nothing to compact in a one-message request: the point is the hold and the verdict.
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const stream = await openStream(`${gateway.baseUrl}/responses`);
  const text = await stream.all();
  // one message cannot be compacted: the failure is relayed exactly as the upstream sent it
  expect(text).toBe(failedInStream().join(''));
  expect(stream.res.headers.get('x-gateway-compaction')).toMatch(/outcome=not_shrunk/);
});

it('a preamble that never ends is relayed past its bound instead of being held forever', async () => {
  const many = Array.from({ length: 400 }, (_, i) => event('response.in_progress', { response: responseObject('', 'in_progress'), pad: 'x'.repeat(200) }, i));
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  upstream = await startFakeUpstream(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of [...preamble(), ...many]) res.write(e);
    await released;
    res.end();
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const stream = await openStream(`${gateway.baseUrl}/responses`);
  await stream.seen('"sequence_number":399');
  release();
  await stream.all();
});
