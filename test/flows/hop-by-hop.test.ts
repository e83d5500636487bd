import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completion, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { endToEnd } from '../../src/upstream/headers.js';
import { rawHttp } from '../reliability/helpers.js';

/*
 * Hop-by-hop headers end at each hop (RFC 9110 7.6.1): the fixed ones, and any the Connection
 * header names, both ways, on the rescued routes and on the pass-through.
 */

let upstream: FakeUpstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startFakeUpstream((_req, res) => {
    const body = JSON.stringify(completion('ok'));
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      connection: 'keep-alive, X-Upstream-Private',
      'x-upstream-private': 'hop secret',
      'x-upstream-kept': 'end to end',
      'keep-alive': 'timeout=5',
    });
    res.end(body);
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
});
afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });

describe.each(['/v1/chat/completions', '/v1/embeddings'])('%s', (path) => {
  it('drops the hop-by-hop headers and those Connection names, both ways; keeps the rest', async () => {
    const text = await rawHttp(
      gateway.origin,
      `POST ${path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
        'Connection: close, X-Client-Private\r\nX-Client-Private: hop secret\r\nX-Client-Kept: end to end\r\nTE: trailers\r\nKeep-Alive: timeout=9\r\n' +
        `Proxy-Authorization: Basic c2VjcmV0\r\n\r\n${body}`,
      5_000,
    );
    const sent = upstream.received.at(-1)!.headers;
    expect(sent['x-client-kept']).toBe('end to end');
    for (const name of ['x-client-private', 'te', 'keep-alive', 'proxy-authorization']) expect(sent[name], name).toBeUndefined();
    const head = text.slice(0, text.indexOf('\r\n\r\n')).toLowerCase();
    expect(head).toMatch(/^http\/1\.1 200/);
    expect(head).toContain('\r\nx-upstream-kept: end to end');
    expect(head).not.toContain('x-upstream-private');
    expect(head).not.toContain('timeout=5');
  });
});

describe('endToEnd, given header names not in lower case (Node and undici always lower them)', () => {
  it('lowers them before it judges them', () => {
    expect(endToEnd({ 'X-Mixed': 'a', connection: 'X-Gone', 'X-GONE': 'b', 'Keep-Alive': 'timeout=1', 'Content-Length': 3 })).toEqual({
      'x-mixed': 'a',
      'content-length': '3',
    });
  });
});
