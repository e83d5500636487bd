import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completion, json, sse, startFakeUpstream, streamEvents, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

// The official SDK pointed at the gateway must see exactly what it sees pointed at the provider.
describe('the openai SDK through the gateway', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    upstream = await startFakeUpstream((req, res) => {
      if (req.json?.stream) return sse(res, streamEvents(['Hel', 'lo', ' there']));
      return json(res, 200, completion('Hello there', 'chatcmpl-abc123'));
    });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  const sdk = (baseURL: string) => new OpenAI({ baseURL, apiKey: 'sk-test-placeholder', maxRetries: 0 });
  const request = { model: 'fake-model', messages: [{ role: 'user' as const, content: 'hi' }] };

  it('non-streaming: same content, id and usage as direct', async () => {
    const direct = await sdk(upstream.baseUrl).chat.completions.create(request);
    const via = await sdk(gateway.baseUrl).chat.completions.create(request);
    expect(via).toEqual(direct);
    expect(via.id).toBe('chatcmpl-abc123');
    expect(via.choices[0].message.content).toBe('Hello there');
    expect(via.usage?.total_tokens).toBe(15);
    expect(upstream.received.at(-1)?.url).toBe('/v1/chat/completions');
  });

  it('streaming: same chunks, ids and usage as direct', async () => {
    const collect = async (baseURL: string) => {
      const stream = await sdk(baseURL).chat.completions.create({
        ...request,
        stream: true,
        stream_options: { include_usage: true },
      });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      return chunks;
    };
    const direct = await collect(upstream.baseUrl);
    const via = await collect(gateway.baseUrl);
    expect(via).toEqual(direct);
    expect(via.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('Hello there');
    expect(via.at(-1)?.usage?.completion_tokens).toBe(3);
    expect(new Set(via.map((c) => c.id))).toEqual(new Set(['chatcmpl-fake-stream']));
  });

  it('returns the request id it sent upstream, and the SDK sees it', async () => {
    const { response, data } = await sdk(gateway.baseUrl).chat.completions.create(request).withResponse();
    const sentUpstream = upstream.received.at(-1)!.headers['x-request-id'];
    expect(sentUpstream).toBeTruthy();
    expect(response.headers.get('x-request-id')).toBe(sentUpstream);
    expect(data.id).toBe('chatcmpl-abc123');
  });
});
