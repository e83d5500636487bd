import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { Client, expectOpenAIError, parse } from './helpers.js';

/*
 * /metrics names models, routes and rates: with auth.metricsKey (GATEWAY_METRICS_KEY) set, it
 * answers only a scrape that presents that key, as a Bearer token or an x-api-key, compared in
 * constant time; without one it is open, as it always was. The health probes stay open either way.
 */

let upstream: FakeUpstream;
let gateway: TestGateway;
const client = new Client();
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

const METRICS_KEY = 'scrape-key-7f3a';

async function get(path: string, headers: Record<string, string> = {}) {
  const res = await request(`${gateway.origin}${path}`, { dispatcher: client.agent, headers, signal: AbortSignal.timeout(10_000) });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: parse(text) };
}

describe('with a metrics key', () => {
  it.each([
    ['no credential', {}],
    ['a wrong Bearer token', { authorization: 'Bearer not-the-key' }],
    ['a wrong x-api-key', { 'x-api-key': 'not-the-key' }],
    ['the key as a prefix', { authorization: `Bearer ${METRICS_KEY}x` }],
    ['a gateway key (the metrics key is its own)', { authorization: 'Bearer gw-key' }],
  ])('%s: 401 invalid_api_key, and no metric in the answer', async (_name, headers) => {
    upstream = await startFakeUpstream();
    gateway = await startGateway({
      upstream: { url: upstream.baseUrl, apiKey: 'sk-up' },
      auth: { keys: ['gw-key'], metricsKey: METRICS_KEY },
    });
    const res = await get('/metrics', headers);
    expect(res.status).toBe(401);
    expectOpenAIError(res.json, 'invalid_api_key');
    expect(res.text).not.toContain('gateway_');
    expect(res.text).not.toContain(METRICS_KEY);
  });

  it.each([
    ['as a Bearer token', { authorization: `Bearer ${METRICS_KEY}` }],
    ['as an x-api-key', { 'x-api-key': METRICS_KEY }],
  ])('%s: the metrics', async (_name, headers) => {
    upstream = await startFakeUpstream();
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, auth: { metricsKey: METRICS_KEY } });
    const res = await get('/metrics', headers);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(res.text).toMatch(/^# HELP /m);
  });

  it('the health probes stay open', async () => {
    upstream = await startFakeUpstream();
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, auth: { metricsKey: METRICS_KEY } });
    expect((await get('/healthz')).status).toBe(200);
    expect((await get('/readyz')).status).toBe(200);
  });

  it('is never written to the log', async () => {
    upstream = await startFakeUpstream();
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, auth: { metricsKey: METRICS_KEY }, log: { level: 'trace' } });
    await get('/metrics', { authorization: `Bearer ${METRICS_KEY}` });
    await get('/metrics', { 'x-api-key': METRICS_KEY });
    expect(gateway.logText()).toContain('/metrics');
    expect(gateway.logText()).not.toContain(METRICS_KEY);
  });
});

it('without a metrics key, /metrics is open as before', async () => {
  upstream = await startFakeUpstream();
  gateway = await startGateway({ upstream: { url: upstream.baseUrl, apiKey: 'sk-up' }, auth: { keys: ['gw-key'] } });
  const res = await get('/metrics');
  expect(res.status).toBe(200);
  expect(res.text).toMatch(/^# HELP /m);
});
