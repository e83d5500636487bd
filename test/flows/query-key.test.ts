import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import type { ConfigInput } from '../../src/config/schema.js';
import { postJson, startGateway, type TestGateway } from '../helpers/gateway.js';
import { carries } from '../helpers/multi-upstream.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';

/*
 * A key in the query (`?key=`, Google's way) is a credential like any other: it reaches the
 * upstream only when the client's credentials do, on every route. A gateway key there never goes
 * further, and where the gateway sends its own key the client's stays behind too; the rest of the
 * query goes as sent.
 */

const GATEWAY_KEY = 'gw-key-query-7a1c';
const OWN_KEY = 'sk-upstream-own-query-2b9d';
const CLIENT_KEY = 'sk-client-query-4e6f';

let standIn: StandIn | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await standIn?.close();
  gateway = standIn = undefined;
});

async function setup(config: Omit<ConfigInput, 'upstream'>, apiKey?: string): Promise<TestGateway> {
  standIn = await startStandIn();
  gateway = await startGateway({ upstream: { url: standIn.baseUrl, ...(apiKey ? { apiKey } : {}) }, ...config });
  return gateway;
}

const CHAT = { model: 'gpt-4.1', messages: [{ role: 'user', content: 'hi' }] };
const MESSAGES = { model: 'claude-x', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] };
const ROUTES = [
  ['chat', '/chat/completions', CHAT, (key: string) => ({ authorization: `Bearer ${key}` })],
  ['responses', '/responses', { model: 'gpt-4.1', input: 'hi' }, (key: string) => ({ authorization: `Bearer ${key}` })],
  ['messages', '/messages', MESSAGES, (key: string) => ({ 'x-api-key': key, 'anthropic-version': '2023-06-01' })],
] as const;

describe.each(ROUTES)('on %s', (_api, path, body, credential) => {
  it('a gateway key in ?key= goes no further; the rest of the query goes as sent', async () => {
    const gw = await setup({ auth: { keys: [GATEWAY_KEY] } }, OWN_KEY);
    const res = await postJson(`${gw.baseUrl}${path}?trace=on&key=${GATEWAY_KEY}&beta=true`, body, credential(GATEWAY_KEY));
    expect(res.status).toBe(200);
    const [got] = standIn!.received;
    expect(got.url).toBe(`/v1${path}?trace=on&beta=true`);
    expect(carries(got, GATEWAY_KEY)).toBe(false);
  });

  it('a query that was only the key goes with it', async () => {
    const gw = await setup({ auth: { keys: [GATEWAY_KEY] } }, OWN_KEY);
    expect((await postJson(`${gw.baseUrl}${path}?key=${GATEWAY_KEY}`, body, credential(GATEWAY_KEY))).status).toBe(200);
    expect(standIn!.received.map((r) => r.url)).toEqual([`/v1${path}`]);
  });

  it("the client's own key stays behind where the gateway sends its own", async () => {
    const gw = await setup({}, OWN_KEY);
    expect((await postJson(`${gw.baseUrl}${path}?key=${CLIENT_KEY}`, body, credential(CLIENT_KEY))).status).toBe(200);
    const [got] = standIn!.received;
    expect(got.url).toBe(`/v1${path}`);
    expect(carries(got, CLIENT_KEY)).toBe(false);
    expect(carries(got, OWN_KEY)).toBe(true);
  });

  it("without keys of the gateway's, the client's ?key= is its own credential and goes as sent", async () => {
    const gw = await setup({});
    expect((await postJson(`${gw.baseUrl}${path}?key=${CLIENT_KEY}`, body, credential(CLIENT_KEY))).status).toBe(200);
    expect(standIn!.received.map((r) => r.url)).toEqual([`/v1${path}?key=${CLIENT_KEY}`]);
  });
});

describe('through the official SDKs, a key in their default query', () => {
  it('openai chat and responses, anthropic messages: the gateway key never reaches the provider', async () => {
    const gw = await setup({ auth: { keys: [GATEWAY_KEY] } }, OWN_KEY);
    const openai = new OpenAI({ baseURL: gw.baseUrl, apiKey: GATEWAY_KEY, defaultQuery: { key: GATEWAY_KEY }, maxRetries: 0 });
    const anthropic = new Anthropic({ baseURL: gw.origin, apiKey: GATEWAY_KEY, defaultQuery: { key: GATEWAY_KEY }, maxRetries: 0 });
    await openai.chat.completions.create({ model: 'gpt-4.1', messages: [{ role: 'user', content: 'hi' }] });
    await openai.responses.create({ model: 'gpt-4.1', input: 'hi' });
    await anthropic.messages.create({ model: 'claude-x', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
    expect(standIn!.received.map((r) => r.url)).toEqual(['/v1/chat/completions', '/v1/responses', '/v1/messages']);
    for (const got of standIn!.received) expect(carries(got, GATEWAY_KEY)).toBe(false);
    expect(gw.logText()).not.toContain(GATEWAY_KEY);
  });
});
