import { afterEach, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';

/*
 * x-gateway-compaction is what this gateway tells its client it did. An upstream (another gateway,
 * or one that wants the client to believe a compaction happened) cannot set it for the client.
 */

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

it('an upstream\u2019s x-gateway-compaction does not reach the client, on a rescued or a pass-through route', async () => {
  upstream = await startFakeUpstream((req, res) =>
    json(res, 200, req.url.endsWith('/chat/completions') ? completion('ok') : { data: [] }, {
      'x-gateway-compaction': 'outcome=replayed, strategy=summarize',
    }),
  );
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const chat = await postChat(gateway, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
  expect(chat.status).toBe(200);
  expect(chat.headers.get('x-gateway-compaction')).toBeNull();
  const models = await fetch(`${gateway.baseUrl}/models`);
  expect(models.status).toBe(200);
  expect(models.headers.get('x-gateway-compaction')).toBeNull();
});
