import { request as httpRequest } from 'node:http';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { afterEach, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await upstream.close();
});

const OVERLONG = JSON.stringify({
  error: {
    message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 190000 tokens.",
    type: 'invalid_request_error',
    code: 'context_length_exceeded',
  },
});
const RATE_LIMIT = JSON.stringify({ error: { message: 'Rate limit reached for requests', code: 'rate_limit_exceeded' } });

/** Posts like an agent that accepts every encoding, and returns the raw (undecoded) response bytes. */
function post(body: unknown): Promise<{ status: number; headers: Record<string, unknown>; bytes: Buffer }> {
  const url = new URL(`${gateway.baseUrl}/chat/completions`);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: 'POST', headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip, deflate, br, zstd' } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, bytes: Buffer.concat(chunks) }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

it.each([
  ['gzip', gzipSync],
  ['br', brotliCompressSync],
] as const)('a %s-compressed overlong error is still recognised and rescued', async (encoding, compress) => {
  upstream = await startFakeUpstream((req, res) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer') return json(res, 200, completion('summary'));
    if (req.headers['x-gateway-compaction']) return json(res, 200, completion('rescued'));
    const bytes = compress(Buffer.from(OVERLONG));
    res.writeHead(400, { 'content-type': 'application/json', 'content-encoding': encoding, 'content-length': bytes.length });
    res.end(bytes);
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
  const res = await post(agentRequest(60));
  expect(res.status).toBe(200);
  expect(parseCompactionHeader(res.headers['x-gateway-compaction'] as string).outcome).toBe('replayed');
  // Only what the gateway can decode is offered: zstd too, on every Node.
  expect(upstream.received[0].headers['accept-encoding']).toBe('gzip, deflate, br, zstd');
});

it('a compressed error that is not overlong reaches the client as the same compressed bytes', async () => {
  const bytes = gzipSync(Buffer.from(RATE_LIMIT));
  upstream = await startFakeUpstream((_req, res) => {
    res.writeHead(429, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': bytes.length });
    res.end(bytes);
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const res = await post(agentRequest(10));
  expect(res.status).toBe(429);
  expect(res.headers['content-encoding']).toBe('gzip');
  expect(res.bytes.equals(bytes)).toBe(true);
  expect(upstream.received).toHaveLength(1);
});
