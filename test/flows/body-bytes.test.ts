import { afterAll, beforeAll, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';

let upstream: FakeUpstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('ok')));
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
});
afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

it('forwards odd whitespace, key order, escapes, unicode and emoji byte-for-byte', async () => {
  const body =
    '{ "messages" :[\n\t{"content":"caf\u00e9 \\u00e9 \u{1F680} \u4F60\u597D \\ud83d\\ude80", "role":"user" , "x":1.50}],' +
    '\r\n  "zeta": null, "model":"m",   "alpha" : [ ]  }   ';
  const res = await postChat(gateway, body);
  expect(res.status).toBe(200);
  const got = upstream.received.at(-1)!;
  expect(Buffer.compare(got.body, Buffer.from(body, 'utf8'))).toBe(0);
  expect(got.headers['content-length']).toBe(String(Buffer.byteLength(body)));
});

it('forwards a 20 MB body intact', async () => {
  const filler = 'x'.repeat(1024 * 1024 - 64);
  const messages = Array.from({ length: 20 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `${i} ${filler}` }));
  const body = JSON.stringify({ model: 'm', messages });
  expect(body.length).toBeGreaterThan(20_000_000);
  const res = await postChat(gateway, body);
  expect(res.status).toBe(200);
  const got = upstream.received.at(-1)!;
  expect(got.body.length).toBe(Buffer.byteLength(body));
  expect(got.body.equals(Buffer.from(body))).toBe(true);
});
