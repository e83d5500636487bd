import { readFileSync } from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { message } from '../helpers/anthropic.js';

const UPSTREAM_KEY = 'sk-ant-upstream-SECRET-2222222222';
const GATEWAY_KEY = 'gw-SECRET-3333333333';
const CLIENT_KEY = 'sk-ant-client-SECRET-1111111111';
// Claude Code's own headers, as recorded (credentials removed there).
const recorded = JSON.parse(readFileSync(new URL('../fixtures/agent-sessions/claude/headers.json', import.meta.url), 'utf8'));
const { host: _h, 'content-length': _l, connection: _c, ...claudeHeaders } = recorded.headers as Record<string, string>;
const body = JSON.stringify({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

async function setup(config: Parameters<typeof startGateway>[0]) {
  upstream = await startFakeUpstream((req, res) =>
    json(res, 200, req.url.includes('count_tokens') ? { input_tokens: 7 } : message('ok', 7)),
  );
  gateway = await startGateway({ ...config, upstream: { url: upstream.baseUrl, ...config.upstream } });
}

const post = (path: string, headers: Record<string, string>) =>
  fetch(`${gateway.origin}${path}`, { method: 'POST', headers: { ...claudeHeaders, ...headers }, body });

it("forwards Claude Code's headers and query as sent, its x-api-key included", async () => {
  await setup({});
  const res = await post('/v1/messages?beta=true', { 'x-api-key': CLIENT_KEY });
  expect(res.status).toBe(200);
  expect(((await res.json()) as any).content[0].text).toBe('ok');
  const got = upstream.received[0];
  expect(got.url).toBe('/v1/messages?beta=true');
  for (const name of [
    'anthropic-version',
    'anthropic-beta',
    'x-claude-code-session-id',
    'x-app',
    'user-agent',
    'anthropic-dangerous-direct-browser-access',
  ]) {
    expect(got.headers[name], name).toBe(claudeHeaders[name]);
  }
  expect(got.headers['x-api-key']).toBe(CLIENT_KEY);
  expect(got.headers.authorization).toBeUndefined();
});

it('sends upstream.apiKey as x-api-key on /v1/messages and on count_tokens, whatever the client sent', async () => {
  await setup({ upstream: { apiKey: UPSTREAM_KEY } });
  await post('/v1/messages?beta=true', { authorization: 'Bearer placeholder' });
  await post('/v1/messages/count_tokens?beta=true', { 'x-api-key': 'placeholder' });
  expect(upstream.received.map((r) => r.url)).toEqual(['/v1/messages?beta=true', '/v1/messages/count_tokens?beta=true']);
  for (const got of upstream.received) {
    expect(got.headers['x-api-key']).toBe(UPSTREAM_KEY);
    expect(got.headers.authorization).toBeUndefined();
  }
  expect(gateway.logText()).not.toContain(UPSTREAM_KEY);
});

it('accepts a gateway key as x-api-key or as a Bearer token, and refuses anything else', async () => {
  await setup({ upstream: { apiKey: UPSTREAM_KEY }, auth: { keys: ['other-key-0000', GATEWAY_KEY] } });
  expect((await post('/v1/messages', { 'x-api-key': GATEWAY_KEY })).status).toBe(200);
  expect((await post('/v1/messages', { authorization: `Bearer ${GATEWAY_KEY}` })).status).toBe(200);
  expect((await post('/v1/messages/count_tokens', { 'x-api-key': GATEWAY_KEY })).status).toBe(200);
  const wrong = await post('/v1/messages', { 'x-api-key': `${GATEWAY_KEY}x` });
  expect(wrong.status).toBe(401);
  expect(((await wrong.json()) as any).error.code).toBe('invalid_api_key');
  expect((await post('/v1/messages', {})).status).toBe(401);
  expect(upstream.received).toHaveLength(3);
  // the gateway key never goes upstream
  for (const got of upstream.received) expect(got.headers['x-api-key']).toBe(UPSTREAM_KEY);
  expect(gateway.logText()).not.toContain(GATEWAY_KEY);
});
