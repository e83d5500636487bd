import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

/*
 * `Expect: 100-continue` is hop-by-hop: curl sends it by itself for any body over 1 MB, exactly
 * the size of the requests this gateway exists for. The gateway answers it at its own hop (Node
 * sends the 100) and never forwards it; the request goes through on every route.
 */

let upstream: FakeUpstream;
let gateway: TestGateway;
beforeAll(async () => {
  upstream = await startFakeUpstream((req, res) => json(res, 200, req.url.endsWith('/chat/completions') ? completion('ok') : { ok: true }));
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

/** A POST as curl sends a large body: Expect: 100-continue, the body only after the 100. */
function postExpecting(path: string, body: Buffer): Promise<{ status: number; continued: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(`${gateway.origin}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': body.length,
        expect: '100-continue',
        authorization: 'Bearer sk-test',
      },
    });
    let continued = false;
    req.on('continue', () => {
      continued = true;
      req.end(body);
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, continued }));
    });
    req.on('error', reject);
  });
}

const big = (path: string) =>
  Buffer.from(
    JSON.stringify(
      path.includes('chat')
        ? { model: 'm', messages: [{ role: 'user', content: 'x'.repeat(2 * 1024 * 1024) }] }
        : { input: 'x'.repeat(2 * 1024 * 1024) },
    ),
  );

describe('Expect: 100-continue with a 2 MB body', () => {
  it.each(['/v1/chat/completions', '/v1/embeddings'])(
    '%s: answered 100 here, the request goes through, the header not forwarded',
    async (path) => {
      const before = upstream.received.length;
      const { status, continued } = await postExpecting(path, big(path));
      expect([status, continued]).toEqual([200, true]);
      const sent = upstream.received.slice(before);
      expect(sent).toHaveLength(1);
      expect(sent[0].headers.expect).toBeUndefined();
      expect(sent[0].body.length).toBe(big(path).length);
    },
  );
});
