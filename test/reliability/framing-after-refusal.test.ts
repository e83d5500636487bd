import { afterAll, beforeAll, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { expectOpenAIError, rawHttp, rawStatus } from './helpers.js';

/*
 * What a connection may carry after the gateway refused something on it, and bodies framed in
 * ways nothing downstream reads (#44, finding 10): a request pipelined behind a 401 never runs
 * upstream (the 401 closes the connection); `Transfer-Encoding: gzip, chunked` is refused in the
 * API's error shape; a bad URL's 400 never echoes a `?key=` back.
 */

let upstream: FakeUpstream;
let gateway: TestGateway;
beforeAll(async () => {
  upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('ok')));
  gateway = await startGateway({ upstream: { url: upstream.baseUrl, apiKey: 'sk-upstream' }, auth: { keys: ['gw-key'] } });
});
afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

const BODY = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
const post = (path: string, headers: string) =>
  `POST ${path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n${headers}Content-Length: ${BODY.length}\r\n\r\n${BODY}`;
/** Each response's status line in a raw stream of them. */
const statuses = (raw: string) => [...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

it.each(['/v1/chat/completions', '/v1/embeddings', '/v1beta/models/m:generateContent'])(
  '%s: a request pipelined behind a 401 is never run, whatever key it carries: the 401 closes the connection',
  async (path) => {
    for (const refused of [post(path, ''), `GET ${path} HTTP/1.1\r\nHost: gw\r\n\r\n`, post(path, 'Authorization: Bearer wrong-key\r\n')]) {
      const before = upstream.received.length;
      const raw = await rawHttp(gateway.origin, refused + post(path, 'Authorization: Bearer gw-key\r\n'), 5_000);
      expect(statuses(raw), refused.split('\r\n')[0]).toEqual([401]);
      expect(raw.slice(0, raw.indexOf('\r\n\r\n')).toLowerCase()).toContain('\r\nconnection: close');
      expect(upstream.received.length).toBe(before);
    }
  },
);

it('a keyed request pipelined behind a keyed one still runs (keep-alive as before)', async () => {
  const before = upstream.received.length;
  const raw = await rawHttp(
    gateway.origin,
    post('/v1/chat/completions', 'Authorization: Bearer gw-key\r\n') +
      post('/v1/chat/completions', 'Authorization: Bearer gw-key\r\nConnection: close\r\n'),
    5_000,
  );
  expect(statuses(raw)).toEqual([200, 200]);
  expect(upstream.received.length).toBe(before + 2);
});

it.each(['gzip, chunked', 'deflate, chunked', 'chunked, chunked'])(
  'Transfer-Encoding: %s is refused with 400 in the API error shape, nothing sent upstream',
  async (coding) => {
    const before = upstream.received.length;
    const chunked = `${BODY.length.toString(16)}\r\n${BODY}\r\n0\r\n\r\n`;
    const raw = await rawHttp(
      gateway.origin,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer gw-key\r\nContent-Type: application/json\r\nTransfer-Encoding: ${coding}\r\n\r\n${chunked}`,
      5_000,
    );
    const { status, body } = rawStatus(raw);
    expect(status).toBe(400);
    expectOpenAIError(JSON.parse(body), 'bad_request');
    expect(upstream.received.length).toBe(before);
  },
);

it.each([
  ['a path that is not percent-encoding', '/v1/chat/%zz?key=AIzaSECRETKEY123'],
  ['a Gemini path that is not percent-encoding', '/v1beta/models/%E0%A4%A:generateContent?key=AIzaSECRETKEY123&alt=sse'],
])('%s: the 400 never echoes a ?key= back', async (_name, target) => {
  const raw = await rawHttp(gateway.origin, `GET ${target} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n`, 5_000);
  const { status, body } = rawStatus(raw);
  expect(status).toBe(400);
  expect(raw).not.toContain('AIzaSECRETKEY123');
  expect(JSON.parse(body).error.code).toBe('invalid_path');
});
