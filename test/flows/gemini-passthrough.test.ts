import { afterEach, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import type { StrictGemini } from '../helpers/strict-gemini.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * The rest of the Gemini API goes through untouched: countTokens (a POST under the same models
 * path as the rescued routes), with the key as the client sent it or the gateway's own.
 */

let upstream: StrictGemini;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

const body = JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'how long is this?' }] }] });

it('countTokens is passed through, not rescued, its body and the key as sent', async () => {
  upstream = await startStandIn({ provider: 'gemini', limitBytes: 10 });
  gateway = await startGateway({ upstream: { url: upstream.origin } });
  const res = await fetch(`${gateway.origin}/v1beta/models/gemini-3.1-pro-preview:countTokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': 'client-key' },
    body,
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('x-gateway-compaction')).toBeNull();
  expect(await res.json()).toHaveProperty('totalTokens');
  const [sent] = upstream.received;
  expect([sent.url, sent.body.toString(), sent.headers['x-goog-api-key']]).toEqual([
    '/v1beta/models/gemini-3.1-pro-preview:countTokens',
    body,
    'client-key',
  ]);
  const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
  expect(metrics).toContain(
    'gateway_http_requests_total{route="passthrough_gemini",method="POST",status_class="2xx",upstream="default"} 1',
  );
});

it('with the gateway\u2019s own key, it goes as x-goog-api-key instead of the client\u2019s', async () => {
  upstream = await startStandIn({ provider: 'gemini' });
  gateway = await startGateway({ upstream: { url: upstream.origin, apiKey: 'gateway-own-key' }, auth: { keys: ['gw-key'] } });
  const res = await fetch(`${gateway.origin}/v1beta/models/gemini-3.1-pro-preview:countTokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': 'gw-key' },
    body,
  });
  expect(res.status).toBe(200);
  expect(upstream.received[0].headers['x-goog-api-key']).toBe('gateway-own-key');
  // A Gemini client presents the gateway key the way it sends any key.
  const refused = await fetch(`${gateway.origin}/v1beta/models/gemini-3.1-pro-preview:countTokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': 'wrong' },
    body,
  });
  expect(refused.status).toBe(401);
  expect(upstream.received).toHaveLength(1);
});
