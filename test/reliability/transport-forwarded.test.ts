import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { message } from '../helpers/anthropic.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { Client } from './helpers.js';

/*
 * The gateway is a hop, and says so as proxies do: the address that connected to it is appended to
 * the X-Forwarded-For the client sent (or starts it), and X-Forwarded-Proto / X-Forwarded-Host keep
 * what an earlier proxy recorded, else tell this hop's scheme (plain HTTP) and the Host the client
 * asked for. On every route: rescued, pass-through, each API.
 */

let upstream: FakeUpstream;
let gateway: TestGateway;
const client = new Client();

beforeAll(async () => {
  upstream = await startFakeUpstream((req, res) => {
    if (req.url.startsWith('/v1/messages')) return json(res, 200, message('hello', 10));
    if (req.url.startsWith('/v1/models')) return json(res, 200, { object: 'list', data: [] });
    return json(res, 200, completion('ok'));
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
});
afterEach(() => {
  upstream.received.length = 0;
});
afterAll(async () => {
  await client.close();
  await gateway.close();
  await upstream.close();
});

const host = () => new URL(gateway.origin).host;
const forwarded = (i = 0) => {
  const h = upstream.received[i].headers;
  return { for: h['x-forwarded-for'], proto: h['x-forwarded-proto'], host: h['x-forwarded-host'] };
};

describe('through the official SDKs', () => {
  it("openai chat.completions: the client address starts X-Forwarded-For; proto and host are this hop's", async () => {
    const sdk = new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'sk-test', maxRetries: 0 });
    await sdk.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(forwarded()).toEqual({ for: '127.0.0.1', proto: 'http', host: host() });
  });

  it('anthropic messages, behind another proxy: its list is extended, its proto and host kept', async () => {
    const sdk = new Anthropic({
      baseURL: gateway.origin,
      apiKey: 'sk-ant-test',
      maxRetries: 0,
      defaultHeaders: { 'x-forwarded-for': '203.0.113.7, 10.0.0.2', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'llm.example.com' },
    });
    await sdk.messages.create({ model: 'claude-x', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    expect(forwarded()).toEqual({ for: '203.0.113.7, 10.0.0.2, 127.0.0.1', proto: 'https', host: 'llm.example.com' });
  });

  it('openai models.list (a pass-through route): the same', async () => {
    const sdk = new OpenAI({
      baseURL: gateway.baseUrl,
      apiKey: 'sk-test',
      maxRetries: 0,
      defaultHeaders: { 'x-forwarded-for': '198.51.100.1' },
    });
    await sdk.models.list();
    expect(upstream.received[0].url).toBe('/v1/models');
    expect(forwarded()).toEqual({ for: '198.51.100.1, 127.0.0.1', proto: 'http', host: host() });
  });
});

it.each([
  ['/v1/chat/completions', 'rescued'],
  ['/v1/responses', 'rescued'],
  ['/v1/embeddings', 'pass-through'],
])('%s (%s): two X-Forwarded-For headers are one list, and the hop goes at its end', async (path) => {
  const res = await client.post(
    `${gateway.origin}${path}`,
    { model: 'm', messages: [{ role: 'user', content: 'hi' }], input: 'hi' },
    {
      // undici sends a repeated header as two lines; Node reads them as one comma-joined list.
      'x-forwarded-for': ['192.0.2.1', '192.0.2.2'] as unknown as string,
    },
  );
  expect(res.status).toBe(200);
  expect(forwarded().for).toBe('192.0.2.1, 192.0.2.2, 127.0.0.1');
});
