import { freePort as deadPort } from '../helpers/ports.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { afterEach, describe, expect, it } from 'vitest';
import { json, sse, startFakeUpstream, streamEvents, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
let upstream: FakeUpstream | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
  gateway = upstream = undefined;
});

describe('upstream failures', () => {
  it('upstream down -> 502 upstream_unreachable, on chat and passthrough', async () => {
    gateway = await startGateway({ upstream: { url: `http://127.0.0.1:${await deadPort()}/v1` } });
    const res = await postChat(gateway, chat);
    expect(res.status).toBe(502);
    expect(res.json.error).toMatchObject({ code: 'upstream_unreachable', type: 'upstream_error' });
    const models = await fetch(`${gateway.baseUrl}/models`);
    expect(models.status).toBe(502);
    expect(((await models.json()) as any).error.code).toBe('upstream_unreachable');
  });

  it('upstream silent past the first-byte timeout -> 504 upstream_timeout', async () => {
    upstream = await startFakeUpstream(() => new Promise(() => {}));
    gateway = await startGateway({ upstream: { url: upstream.baseUrl, firstByteTimeoutMs: 300 } });
    const res = await postChat(gateway, chat);
    expect(res.status).toBe(504);
    expect(res.json.error.code).toBe('upstream_timeout');
    const models = await fetch(`${gateway.baseUrl}/models`);
    expect(models.status).toBe(504);
  });

  it.each([
    [400, '{"error":{"message":"bad param","type":"invalid_request_error","param":"temperature","code":null}}'],
    [401, '{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}'],
    [429, '{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}'],
    [500, '<html>oops</html>'],
    [503, ''],
  ])('relays an upstream %i with its body unchanged, after one call', async (status, body) => {
    upstream = await startFakeUpstream((_req, res) => json(res, status, body, { 'x-custom': 'kept', 'retry-after': '7' }));
    gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
    const res = await postChat(gateway, chat);
    expect(res.status).toBe(status);
    expect(res.text).toBe(body);
    expect(res.headers.get('x-custom')).toBe('kept');
    expect(res.headers.get('retry-after')).toBe('7');
    expect(upstream.received.length).toBe(1);
  });

  it('client abort mid-stream closes the upstream socket', async () => {
    let upstreamSaw: Promise<void> | undefined;
    upstream = await startFakeUpstream(async (req, res) => {
      upstreamSaw = req.aborted;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(streamEvents(['a'])[0]);
      await req.aborted;
    });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
    const controller = new AbortController();
    const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...chat, stream: true }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await upstreamSaw; // resolves only when the gateway closed its upstream request
    expect(upstream.received.length).toBe(1);
    await expect.poll(() => upstream!.openSockets()).toBe(0);
    // the next request still works
    upstream.handle((_req, r) => sse(r, streamEvents(['ok'])));
    const next = await postChat(gateway, { ...chat, stream: true });
    expect(next.status).toBe(200);
    expect(next.text).toContain('[DONE]');
  });

  it('client abort while waiting for headers aborts the upstream request', async () => {
    let upstreamSaw: Promise<void> | undefined;
    let arrived!: () => void;
    const gotRequest = new Promise<void>((r) => (arrived = r));
    upstream = await startFakeUpstream(async (req) => {
      upstreamSaw = req.aborted;
      arrived();
      await req.aborted;
    });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
    const controller = new AbortController();
    const pending = fetch(`${gateway.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat),
      signal: controller.signal,
    }).catch((e) => e);
    await gotRequest;
    controller.abort();
    await pending;
    await upstreamSaw;
    await expect.poll(() => upstream!.openSockets()).toBe(0);
  });
});

describe('bad requests', () => {
  it.each(['{"model":', 'not json', ''])(
    "invalid JSON %j is the upstream's to answer: relayed to it untouched, its answer to the client",
    async (body) => {
      const answer =
        '{"error":{"message":"We could not parse the JSON body of your request.","type":"invalid_request_error","param":null,"code":null}}';
      upstream = await startFakeUpstream((_req, res) => json(res, 400, answer));
      gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
      const res = await postChat(gateway, body);
      expect(upstream.received).toHaveLength(1);
      expect(upstream.received[0].body.toString()).toBe(body);
      expect(res.status).toBe(400);
      expect(res.text).toBe(answer);
      expect(res.headers.get('x-gateway-compaction')).toBeNull();
    },
  );

  it('an invalid JSON body the upstream calls overlong cannot be compacted: its error passes through', async () => {
    const answer = JSON.stringify({
      error: { message: "This model's maximum context length is 10 tokens.", code: 'context_length_exceeded' },
    });
    upstream = await startFakeUpstream((_req, res) => json(res, 400, answer));
    gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
    const res = await postChat(gateway, '{"model":"m","messages":[');
    expect(upstream.received).toHaveLength(1);
    expect(res.status).toBe(400);
    expect(res.text).toBe(answer);
    expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'not_shrunk', why: 'no_messages' });
  });

  it('a body over the gateway limit -> 413 request_too_large', async () => {
    upstream = await startFakeUpstream();
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, server: { bodyLimitBytes: 1000 } });
    const res = await postChat(gateway, { model: 'm', messages: [{ role: 'user', content: 'x'.repeat(2000) }] });
    expect(res.status).toBe(413);
    expect(res.json.error.code).toBe('request_too_large');
    expect(upstream.received.length).toBe(0);
  });
});
