import Anthropic from '@anthropic-ai/sdk';
import type { ServerResponse } from 'node:http';
import { afterEach, expect, it } from 'vitest';
import { event, message, promptTooLong, streamOf } from '../helpers/anthropic.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { sleep } from './helpers.js';

/*
 * A Messages (or Responses) stream opens with events that carry no output (message_start, ping),
 * and a failure may still follow them, so the gateway holds them while it waits to know, and
 * rescues the request if the failure says it was too long. It waits upstream.preambleHoldMs at
 * most: an upstream that pings and pings before its first token gets its stream to the client
 * then, and a failure after that is relayed as it comes (the rescue's chance is given up).
 */

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

const PING = event('ping', {});

/** message_start, then a ping every 50 ms while the client is there: 400 at most (20 s). */
function pingForever(state: { pings: number; ended: boolean }) {
  return async (_req: unknown, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(streamOf(message('', 10))[0]);
    for (; state.pings < 400 && !res.destroyed; state.pings++) {
      res.write(PING);
      await sleep(50);
    }
    state.ended = true;
    res.end();
  };
}

it('an upstream that only pings: the client has message_start once the hold is over, while the pings go on', async () => {
  const state = { pings: 0, ended: false };
  upstream = await startFakeUpstream(pingForever(state));
  gateway = await startGateway({ upstream: { url: upstream.baseUrl, preambleHoldMs: 300 } });
  const sdk = new Anthropic({ baseURL: gateway.origin, apiKey: 'sk-ant-test', maxRetries: 0, timeout: 30_000 });

  const stream = await sdk.messages.create({
    model: 'claude-x',
    max_tokens: 100,
    stream: true,
    messages: [{ role: 'user', content: 'hi' }],
  });
  // The SDK passes pings over: the first event it yields is message_start.
  let first: string | undefined;
  for await (const e of stream) {
    first = e.type;
    break;
  }
  console.log(`the client had message_start after ${state.pings} pings upstream (50 ms apart, hold 300 ms)`);
  // Held without a bound, it would wait for 64 KiB of pings: the whole 20 s, and the upstream's end.
  expect(state.ended).toBe(false);
  expect(first).toBe('message_start');
  expect(upstream.received).toHaveLength(1);
  // The client left: the upstream stream is cut, not left pinging.
  await expect.poll(() => state.ended, { timeout: 5_000 }).toBe(true);
  expect(state.pings).toBeLessThan(400);
});

it('a failure after the hold is relayed as it came: no replay', async () => {
  const failure = `event: error\ndata: ${JSON.stringify(promptTooLong(30_000, 20_000))}\n\n`;
  upstream = await startFakeUpstream(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(streamOf(message('', 10))[0]);
    for (let i = 0; i < 20 && !res.destroyed; i++) {
      res.write(PING);
      await sleep(50);
    }
    res.end(failure);
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl, preambleHoldMs: 300 } });
  const res = await fetch(`${gateway.origin}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-test' },
    body: JSON.stringify({ model: 'claude-x', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  expect(res.status).toBe(200);
  expect(res.headers.get('x-gateway-compaction')).toBeNull();
  expect(text).toBe(streamOf(message('', 10))[0] + PING.repeat(20) + failure);
  expect(upstream.received).toHaveLength(1);
});

it('a failure within the hold is still rescued', async () => {
  upstream = await startFakeUpstream(async (req, res) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(message('summary of the earlier turns', 10)));
      return;
    }
    if (req.headers['x-gateway-compaction']) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(streamOf(message('rescued', 10)).join(''));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(streamOf(message('', 10))[0] + PING);
    await sleep(100);
    res.end(`event: error\ndata: ${JSON.stringify(promptTooLong(30_000, 20_000))}\n\n`);
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl, preambleHoldMs: 3_000 }, summarizer: { maxInputTokens: 500_000 } });
  const turns = Array.from({ length: 30 }, (_, i) => ({
    role: i % 2 ? 'assistant' : 'user',
    content: `turn ${i} ${'words '.repeat(200)}`,
  }));
  const res = await fetch(`${gateway.origin}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-test' },
    body: JSON.stringify({ model: 'claude-x', max_tokens: 100, stream: true, messages: [...turns, { role: 'user', content: 'and now?' }] }),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  expect(res.headers.get('x-gateway-compaction')).toMatch(/^outcome=replayed/);
  expect(text).toBe(streamOf(message('rescued', 10)).join(''));
});
