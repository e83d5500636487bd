import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { expectAnthropicError, expectOpenAIError, rawStatus, sleep } from './helpers.js';
import { abortTolerantUpstream, slowClient as slowClientOf, type SlowClient } from './transport-helpers.js';

/*
 * Slow clients. A client has server.requestTimeoutMs to send its whole request and
 * server.headersTimeoutMs for its headers, then gets a 408 and its connection is closed; an idle
 * keep-alive connection closes after server.keepAliveTimeoutMs. A request the gateway answers
 * before reading its body (a 401, a 413) has its connection closed with the answer, so a client
 * that trickles a body it will never finish holds no descriptor. None of this cuts a legitimate
 * request that waits long for the upstream: it was whole before the wait began.
 */

let upstream: FakeUpstream | undefined;
let gateway: TestGateway | undefined;
const clients: SlowClient[] = [];
const closeLater: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.socket.destroy();
  await gateway?.close();
  await upstream?.close();
  for (const close of closeLater.splice(0)) await close();
  gateway = upstream = undefined;
});

const CHAT_HEAD = 'POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n';
/** 2,000 short headers (10 KB, within the header size limit): Node's default count limit, past which it dropped the rest. */
const PADDING = Array.from({ length: 2_000 }, (_, i) => `p${i % 10}:1\r\n`).join('');

const slowClient = (origin: string, head: string, trickle?: string) => slowClientOf(origin, head, clients, trickle);

function openConnections(gw: TestGateway): Promise<number> {
  return new Promise((resolve, reject) => gw.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
}

describe('the request timeout', () => {
  it('a client that trickles its body is answered 408 and cut once server.requestTimeoutMs passes', async () => {
    upstream = await startFakeUpstream();
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, server: { requestTimeoutMs: 1_000, headersTimeoutMs: 1_000 } });
    const client = await slowClient(gateway.origin, CHAT_HEAD);
    expect(await client.closedWithin(10_000)).toBe(true);
    const answer = rawStatus(client.received());
    expect(answer.status).toBe(408);
    expect(client.received()).toMatch(/\r\nconnection: close\r\n/i);
    expectOpenAIError(JSON.parse(answer.body), 'request_timeout');
    expect(upstream.received).toHaveLength(0);
    // The front door's reader saw the request end early: no bug line for it.
    expect(gateway.logLines().filter((l) => l.level >= 50)).toEqual([]);
  });

  it('a client that trickles its headers is cut once server.headersTimeoutMs passes', async () => {
    upstream = await startFakeUpstream();
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, server: { requestTimeoutMs: 5_000, headersTimeoutMs: 800 } });
    const client = await slowClient(
      gateway.origin,
      'POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n',
      'X-Slow: ' + 'a'.repeat(200),
    );
    expect(await client.closedWithin(10_000)).toBe(true);
    expect(rawStatus(client.received()).status).toBe(408);
    expect(upstream.received).toHaveLength(0);
  });

  it('an idle keep-alive connection is closed after server.keepAliveTimeoutMs', async () => {
    upstream = await startFakeUpstream();
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, server: { keepAliveTimeoutMs: 300 } });
    const client = await slowClient(gateway.origin, 'GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n', '');
    expect(await client.closedWithin(10_000)).toBe(true);
    expect(rawStatus(client.received()).status).toBe(200);
  });

  it('does not cut a request whose upstream takes longer than the timeout to answer', async () => {
    upstream = await startFakeUpstream(async (_req, res) => {
      await sleep(2_500);
      json(res, 200, completion('worth the wait'));
    });
    gateway = await startGateway({
      upstream: { url: upstream.baseUrl },
      server: { requestTimeoutMs: 1_000, headersTimeoutMs: 1_000, keepAliveTimeoutMs: 1_000 },
    });
    const sdk = new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'sk-test', maxRetries: 0, timeout: 15_000 });
    const answer = await sdk.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'take your time' }] });
    expect(answer.choices[0].message.content).toBe('worth the wait');
  });

  it('serves a legitimate client while 50 slow ones are connected, and lets every slow one go', async () => {
    // Half the slow bodies stream upstream as they come (the pass-through): cut, their upstream requests abort.
    const standIn = await abortTolerantUpstream();
    closeLater.push(standIn.close);
    // A short keep-alive timeout: the SDK's own idle connection goes too, and the count returns to where it was.
    gateway = await startGateway({
      upstream: { url: standIn.baseUrl },
      server: { requestTimeoutMs: 3_000, headersTimeoutMs: 3_000, keepAliveTimeoutMs: 500 },
    });
    const idle = await openConnections(gateway);
    const slow = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        slowClient(gateway!.origin, i % 2 ? CHAT_HEAD : CHAT_HEAD.replace('/v1/chat/completions', '/v1/embeddings')),
      ),
    );

    const sdk = new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'sk-test', maxRetries: 0, timeout: 15_000 });
    const answer = await sdk.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(answer.choices[0].message.content).toBe('ok');
    console.log(
      `the legitimate client was answered with ${(await openConnections(gateway)) - idle - 1} of the 50 slow connections still open`,
    );

    const closed = await Promise.all(slow.map((c) => c.closedWithin(10_000)));
    expect(closed.filter(Boolean)).toHaveLength(50);
    expect(slow.map((c) => rawStatus(c.received()).status)).toEqual(Array(50).fill(408));
    await expect.poll(() => openConnections(gateway!), { timeout: 5_000 }).toBe(idle);
    // A cut pass-through upload aborts its upstream request: the client's doing, not an upstream failure.
    expect(gateway.logLines().filter((l) => l.level >= 40)).toEqual([]);
    expect(gateway.logLines().filter((l) => l.msg === 'client disconnected; upstream request aborted').length).toBeGreaterThan(0);
  });
});

describe('an early answer closes the connection', () => {
  const KEY = 'gw-key-for-timeouts-test';

  it.each([
    ['a chat request without the gateway key', CHAT_HEAD],
    [
      'a Messages request with a wrong x-api-key',
      CHAT_HEAD.replace('/v1/chat/completions', '/v1/messages').replace('\r\n\r\n', '\r\nx-api-key: wrong\r\n\r\n'),
    ],
    ['a pass-through request without the gateway key', CHAT_HEAD.replace('/v1/chat/completions', '/v1/embeddings')],
    ['a chat request whose Content-Length follows 2,000 other headers', CHAT_HEAD.replace('Content-Type', `${PADDING}Content-Type`)],
    [
      'a pass-through request whose Content-Length follows 2,000 other headers',
      CHAT_HEAD.replace('/v1/chat/completions', '/v1/embeddings').replace('Content-Type', `${PADDING}Content-Type`),
    ],
  ])('%s: 401, then the connection is closed while the client is still sending', async (_name, head) => {
    upstream = await startFakeUpstream();
    // The request timeout is the default (120 s): what closes the connection here is the 401.
    gateway = await startGateway({ upstream: { url: upstream.baseUrl, apiKey: 'sk-upstream' }, auth: { keys: [KEY] } });
    const client = await slowClient(gateway.origin, head);
    expect(await client.closedWithin(5_000), client.received()).toBe(true);
    const answer = rawStatus(client.received());
    expect(answer.status, client.received()).toBe(401);
    expect(client.received()).toMatch(/\r\nconnection: close\r\n/i);
    // In the shape of the caller's API: Anthropic's on /v1/messages.
    if (head.includes('/v1/messages')) expectAnthropicError(JSON.parse(answer.body), 'invalid_api_key', 'authentication_error');
    else expectOpenAIError(JSON.parse(answer.body), 'invalid_api_key');
    expect(upstream.received).toHaveLength(0);
  });

  it('a declared body over the limit: 413, then the connection is closed', async () => {
    upstream = await startFakeUpstream();
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, server: { bodyLimitBytes: 1_000 } });
    const client = await slowClient(gateway.origin, CHAT_HEAD);
    expect(await client.closedWithin(5_000), client.received()).toBe(true);
    expect(rawStatus(client.received()).status).toBe(413);
    expect(client.received()).toMatch(/\r\nconnection: close\r\n/i);
  });

  it('a 401 to a request without a body keeps the connection, for the next request', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, { object: 'list', data: [] }));
    gateway = await startGateway({ upstream: { url: upstream.baseUrl, apiKey: 'sk-upstream' }, auth: { keys: [KEY] } });
    const request = (key: string) => `GET /v1/models HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${key}\r\n\r\n`;
    const client = await slowClient(gateway.origin, request('wrong'), '');
    const answers = () => client.received().match(/HTTP\/1\.1 \d{3}/g) ?? [];
    await expect.poll(answers, { timeout: 5_000 }).toEqual(['HTTP/1.1 401']);
    expect(client.received()).not.toMatch(/connection: close/i);
    client.socket.write(request(KEY));
    await expect.poll(answers, { timeout: 5_000 }).toEqual(['HTTP/1.1 401', 'HTTP/1.1 200']);
    expect(upstream.received).toHaveLength(1);
  });
});
