import { afterEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

// An agent whose base URL lacks /v1 gets 404s; the answer says what to change.

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await upstream.close();
});

describe('a 404 for an API path without /v1', () => {
  it.each(['/chat/completions', '/responses', '/messages', '/models', '/embeddings'])(
    '%s says to add /v1 to the base URL',
    async (path) => {
      upstream = await startFakeUpstream();
      gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
      const res = await fetch(`${gateway.origin}${path}?x=1`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(res.status).toBe(404);
      const body = (await res.json()) as any;
      expect(body.error.code).toBe('not_found');
      expect(body.error.message).toBe(
        `Unknown route: POST ${path}. The gateway serves the API under /v1: add /v1 to the client's base URL (POST /v1${path}).`,
      );
      expect(upstream.received).toHaveLength(0);
    },
  );

  it('any other unknown path gets the plain 404', async () => {
    upstream = await startFakeUpstream();
    gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
    const res = await fetch(`${gateway.origin}/chat/completionsx`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as any).error.message).toBe('Unknown route: GET /chat/completionsx.');
  });
});
