import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

let upstream: FakeUpstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startFakeUpstream((req, res) =>
    json(res, 200, { object: 'list', data: [], echo: { method: req.method, url: req.url, body: req.body.toString() } }),
  );
  // A provider whose OpenAI base URL has a path prefix, like https://api.groq.com/openai/v1.
  gateway = await startGateway({ upstream: { url: `${upstream.origin}/openai/v1` } });
});
afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

/** A raw HTTP request, so that odd paths reach the gateway exactly as written. */
function raw(path: string, method = 'GET', body?: string): Promise<{ status: number; text: string }> {
  const url = new URL(gateway.origin);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, path, method, headers: body ? { 'content-type': 'application/json' } : {} },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('passthrough of other /v1 paths', () => {
  it('GET /v1/models goes to <base>/models', async () => {
    const res = await fetch(`${gateway.baseUrl}/models`);
    expect(res.status).toBe(200);
    expect(upstream.received.at(-1)!.url).toBe('/openai/v1/models');
    expect(upstream.received.at(-1)!.method).toBe('GET');
  });

  it('POST /v1/embeddings streams the body through untouched', async () => {
    const body = '{"model":"e",  "input":["a", "\u00e9\u{1F680}"]}';
    const res = await fetch(`${gateway.baseUrl}/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(res.status).toBe(200);
    const got = upstream.received.at(-1)!;
    expect(got.url).toBe('/openai/v1/embeddings');
    expect(got.body.equals(Buffer.from(body))).toBe(true);
  });

  it('keeps the query string', async () => {
    await fetch(`${gateway.baseUrl}/files?purpose=batch&limit=2`);
    expect(upstream.received.at(-1)!.url).toBe('/openai/v1/files?purpose=batch&limit=2');
  });

  it('relays upstream error statuses and bodies unchanged', async () => {
    upstream.handle((_req, res) => json(res, 404, '{"error":{"message":"no such model","code":"model_not_found"}}'));
    const res = await fetch(`${gateway.baseUrl}/models/nope`);
    expect(res.status).toBe(404);
    expect(await res.text()).toBe('{"error":{"message":"no such model","code":"model_not_found"}}');
    upstream.handle((req, res) => json(res, 200, { echo: req.url }));
  });

  it.each([
    '/v1/../admin',
    '/v1/models/../../admin',
    '/v1/%2e%2e/admin',
    '/v1/%2E%2E/%2e%2e/secret',
    '/v1/models/..%2f..%2fadmin',
    '/v1/models%2f..%2f..%2fadmin',
    '/v1/models/..%5c..%5cadmin',
    '/v1/./models',
  ])('refuses the traversal %s without calling upstream', async (path) => {
    const before = upstream.received.length;
    const res = await raw(path);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text).error.code).toBe('invalid_path');
    expect(upstream.received.length).toBe(before);
  });

  it('never lets a client pick another host', async () => {
    const before = upstream.received.length;
    const res = await raw('http://169.254.169.254/v1/models');
    expect([400, 404]).toContain(res.status);
    const res2 = await fetch(`${gateway.baseUrl}/models`, { headers: { host: 'evil.example' } });
    expect(res2.status).toBe(200);
    expect(upstream.received.at(-1)!.headers.host).toBe(new URL(upstream.origin).host);
    expect(upstream.received.length).toBe(before + 1);
  });
});

describe('the gateway\u2019s own routes', () => {
  it('healthz, readyz and metrics answer', async () => {
    expect((await fetch(`${gateway.origin}/healthz`)).status).toBe(200);
    expect((await fetch(`${gateway.origin}/readyz`)).status).toBe(200);
    const metrics = await fetch(`${gateway.origin}/metrics`);
    const text = await metrics.text();
    expect(text).toContain('process_cpu_seconds_total');
    expect(text).toContain('gateway_http_requests_total');
    expect(text).toContain('gateway_upstream_ttfb_seconds');
  });

  it('answers unknown routes with a 404 in OpenAI shape', async () => {
    const res = await fetch(`${gateway.origin}/nope`);
    expect(res.status).toBe(404);
    const body = (await res.json()) as any;
    expect(body.error).toMatchObject({ code: 'not_found', type: 'invalid_request_error', param: null });
    expect(typeof body.error.message).toBe('string');
  });

  it('readyz fails once draining starts', async () => {
    gateway.app.startDraining();
    const res = await fetch(`${gateway.origin}/readyz`);
    expect(res.status).toBe(503);
    expect(((await res.json()) as any).error.code).toBe('shutting_down');
  });
});
