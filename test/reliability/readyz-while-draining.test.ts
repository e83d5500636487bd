import { connect } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { sleep } from './helpers.js';

/*
 * While the gateway drains (SIGTERM: readiness fails, the listener closes, in-flight requests
 * finish), a request that still reaches it, on a connection kept alive behind one in flight, gets
 * the gateway's own answer: /readyz its 503 `shutting_down`, an API request that 503 in its API's
 * error shape, and the connection closes. fastify's own drain answer (`{"error":"Service
 * Unavailable",...}`, no API's shape) is off. A new connection is refused: the listener is closed
 * (docs/operations.md).
 */

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close().catch(() => undefined);
  await upstream?.close();
});

const CHAT = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });

/** Sends a slow request, starts the drain while it is in flight, then sends `next` on the same connection; returns everything the connection got. */
async function behindInFlight(next: string): Promise<string> {
  upstream = await startFakeUpstream(async (_req, res) => {
    await sleep(600);
    json(res, 200, completion('slow answer'));
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const port = Number(new URL(gateway.origin).port);
  const socket = connect(port, '127.0.0.1');
  let out = '';
  socket.setEncoding('latin1');
  socket.on('data', (d) => (out += d));
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: ${CHAT.length}\r\n\r\n${CHAT}`,
  );
  await sleep(200);
  gateway.app.startDraining();
  const closing = gateway.app.close();
  await sleep(50);
  socket.write(next);
  await Promise.race([closed, sleep(5_000)]);
  socket.destroy();
  await closing;
  return out;
}

const responses = (raw: string) => raw.split(/(?=HTTP\/1\.1 \d{3} )/).filter(Boolean);

it('/readyz behind an in-flight request during the drain: 503 shutting_down, and the in-flight one finishes', async () => {
  const [first, second] = responses(await behindInFlight('GET /readyz HTTP/1.1\r\nHost: gw\r\n\r\n'));
  expect(first).toMatch(/^HTTP\/1\.1 200 /);
  expect(first).toContain('slow answer');
  expect(second).toMatch(/^HTTP\/1\.1 503 /);
  expect(second.toLowerCase()).toContain('\r\nconnection: close');
  expect(JSON.parse(second.slice(second.indexOf('\r\n\r\n') + 4)).error.code).toBe('shutting_down');
});

it('an API request behind an in-flight one during the drain: 503 in its API error shape, never sent upstream', async () => {
  const body = JSON.stringify({ model: 'claude', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
  const [, second] = responses(
    await behindInFlight(
      `POST /v1/messages HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    ),
  );
  expect(second).toMatch(/^HTTP\/1\.1 503 /);
  const error = JSON.parse(second.slice(second.indexOf('\r\n\r\n') + 4));
  expect(error).toMatchObject({ type: 'error', error: { type: expect.any(String), message: expect.any(String) } });
  expect(upstream.received).toHaveLength(1);
});
