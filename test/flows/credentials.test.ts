import { afterEach, describe, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const CLIENT_KEY = 'sk-client-SECRET-1111111111';
const UPSTREAM_KEY = 'sk-upstream-SECRET-2222222222';
const GATEWAY_KEY = 'gw-SECRET-3333333333';

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

async function setup(config: Parameters<typeof startGateway>[0]['upstream'] & object, extra = {}) {
  upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('ok')));
  gateway = await startGateway({ upstream: { url: upstream.baseUrl, ...config }, ...extra });
}

function expectNoSecretsInLogs(secrets: string[]) {
  const logs = gateway.logText();
  expect(logs.length).toBeGreaterThan(0);
  for (const secret of secrets) expect(logs).not.toContain(secret);
}

describe('credentials', () => {
  it('forwards the client Authorization and api-key unchanged by default', async () => {
    await setup({});
    const res = await postChat(gateway, chat, { authorization: `Bearer ${CLIENT_KEY}`, 'api-key': 'azure-SECRET-key' });
    expect(res.status).toBe(200);
    const got = upstream.received.at(-1)!;
    expect(got.headers.authorization).toBe(`Bearer ${CLIENT_KEY}`);
    expect(got.headers['api-key']).toBe('azure-SECRET-key');
    // the same on the passthrough route
    await fetch(`${gateway.baseUrl}/models`, { headers: { authorization: `Bearer ${CLIENT_KEY}` } });
    expect(upstream.received.at(-1)!.headers.authorization).toBe(`Bearer ${CLIENT_KEY}`);
    expectNoSecretsInLogs([CLIENT_KEY, 'azure-SECRET-key']);
  });

  it('replaces the client credentials with upstream.apiKey when set', async () => {
    await setup({ apiKey: UPSTREAM_KEY });
    const res = await postChat(gateway, chat, { authorization: 'Bearer placeholder', 'api-key': 'placeholder2' });
    expect(res.status).toBe(200);
    const got = upstream.received.at(-1)!;
    expect(got.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(got.headers['api-key']).toBeUndefined();
    await fetch(`${gateway.baseUrl}/models`, { headers: { authorization: 'Bearer placeholder' } });
    expect(upstream.received.at(-1)!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expectNoSecretsInLogs([UPSTREAM_KEY]);
  });

  it('requires one of auth.keys when set, and never forwards it', async () => {
    await setup({ apiKey: UPSTREAM_KEY }, { auth: { keys: ['other-key-0000', GATEWAY_KEY] } });
    const missing = await postChat(gateway, chat);
    expect(missing.status).toBe(401);
    expect(missing.json.error.code).toBe('invalid_api_key');
    const wrong = await postChat(gateway, chat, { authorization: `Bearer ${GATEWAY_KEY}x` });
    expect(wrong.status).toBe(401);
    const models = await fetch(`${gateway.baseUrl}/models`, { headers: { authorization: 'Bearer nope' } });
    expect(models.status).toBe(401);
    expect(upstream.received.length).toBe(0);

    const right = await postChat(gateway, chat, { authorization: `Bearer ${GATEWAY_KEY}` });
    expect(right.status).toBe(200);
    expect(upstream.received.length).toBe(1);
    expect(upstream.received[0].headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    // health and metrics stay open for probes
    expect((await fetch(`${gateway.origin}/healthz`)).status).toBe(200);
    expectNoSecretsInLogs([GATEWAY_KEY, UPSTREAM_KEY]);
  });
});
