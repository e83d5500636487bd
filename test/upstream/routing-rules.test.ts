import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { errorBodyFor } from '../../src/http/errors.js';
import { summarizerDestination } from '../../src/rescue/summarizer-credentials.js';
import { egressRoute, noProxyMatches } from '../../src/upstream/egress.js';
import { resolveUpstreams } from '../../src/upstream/upstreams.js';

// The rules behind routing, egress and credentials, each as a table: what the startup line says
// and the pools do (egress), who gets which key (summarizer), and the error shape each API's
// clients parse.

describe('which proxy an origin goes through', () => {
  const env = {
    HTTPS_PROXY: 'http://user:pw@proxy.corp:3128',
    HTTP_PROXY: 'http://plain.corp:8080',
    NO_PROXY: 'internal.corp,.svc.cluster.local,127.0.0.1:8000',
  };
  it.each([
    ['https://api.openai.com', undefined, env, 'http://proxy.corp:3128', 'HTTPS_PROXY'],
    ['http://vllm.internal:8000', undefined, env, 'http://plain.corp:8080', 'HTTP_PROXY'],
    ['https://api.openai.com', undefined, { HTTP_PROXY: 'http://plain.corp:8080' }, 'http://plain.corp:8080', 'HTTP_PROXY'],
    ['https://llm.internal.corp', undefined, env, 'direct', 'NO_PROXY lists it'],
    ['http://vllm.ns.svc.cluster.local', undefined, env, 'direct', 'NO_PROXY lists it'],
    ['http://127.0.0.1:8000', undefined, env, 'direct', 'NO_PROXY lists it'],
    // The same host on another port is not listed.
    ['http://127.0.0.1:9000', undefined, env, 'http://plain.corp:8080', 'HTTP_PROXY'],
    ['https://api.openai.com', 'none', env, 'direct', 'proxy: none'],
    ['https://api.openai.com', 'http://own.corp:1', env, 'http://own.corp:1', 'its proxy setting'],
    ['https://api.openai.com', undefined, {}, 'direct', 'no HTTPS_PROXY or HTTP_PROXY set'],
    // Lower-case names first, as curl and undici read them.
    [
      'https://api.openai.com',
      undefined,
      { https_proxy: 'http://lower:1', HTTPS_PROXY: 'http://upper:1' },
      'http://lower:1',
      'HTTPS_PROXY',
    ],
  ])('%s (proxy %s) goes via %s', (origin, proxy, e, via, because) => {
    expect(egressRoute(origin, proxy, e)).toMatchObject({ via: via.replace(/\/\/[^@]*@/, '//'), because });
  });

  it('NO_PROXY: * is everything; a leading dot or *. is the host and its subdomains; a near name is not', () => {
    const url = (u: string) => new URL(u);
    expect(noProxyMatches(url('https://anything.example'), '*')).toBe(true);
    expect(noProxyMatches(url('https://a.b.example.com'), '*.example.com')).toBe(true);
    expect(noProxyMatches(url('https://example.com'), '.example.com')).toBe(true);
    expect(noProxyMatches(url('https://notexample.com'), 'example.com')).toBe(false);
    expect(noProxyMatches(url('https://example.com'), 'example.com:8443')).toBe(false);
    expect(noProxyMatches(url('https://example.com:8443'), 'example.com:8443')).toBe(true);
  });

  it('NO_PROXY and IP addresses, as curl reads them: an address matches itself or a CIDR block holding it, never a name suffix', () => {
    const url = (u: string) => new URL(u);
    expect(noProxyMatches(url('http://10.0.0.1:8000'), '0.0.1')).toBe(false);
    expect(noProxyMatches(url('http://10.0.0.1:8000'), '10.0.0.1')).toBe(true);
    expect(noProxyMatches(url('http://10.0.0.1:8000'), '10.0.0.1:8000')).toBe(true);
    expect(noProxyMatches(url('http://10.0.0.1:8000'), '10.0.0.1:9000')).toBe(false);
    expect(noProxyMatches(url('http://10.1.2.3:8000'), 'example.com,10.0.0.0/8')).toBe(true);
    expect(noProxyMatches(url('http://11.1.2.3:8000'), '10.0.0.0/8')).toBe(false);
    expect(noProxyMatches(url('http://192.168.1.20'), '192.168.1.0/24')).toBe(true);
    expect(noProxyMatches(url('http://[::1]:8080'), '::1')).toBe(true);
    expect(noProxyMatches(url('http://[::1]:8080'), '[::1]:8080')).toBe(true);
    expect(noProxyMatches(url('http://[::1]:8080'), '[::1]:9090')).toBe(false);
    expect(noProxyMatches(url('http://[fd00::5]'), 'fd00::/8')).toBe(true);
    expect(noProxyMatches(url('http://[fe80::5]'), 'fd00::/8')).toBe(false);
    // A block never matches a name: nothing is resolved.
    expect(noProxyMatches(url('http://localhost:8000'), '127.0.0.0/8')).toBe(false);
    expect(noProxyMatches(url('http://127.0.0.1:8000'), '127.0.0.0/8')).toBe(true);
  });
});

describe("where one upstream's summaries come from, and with which key", () => {
  const config = validateConfig({
    upstreams: {
      openai: { url: 'https://api.openai.com/v1', apiKey: 'sk-openai' },
      anthropic: { url: 'https://api.anthropic.com/v1', apis: ['messages'] },
      local: { url: 'http://127.0.0.1:8000/v1', apis: ['chat'], summarizer: { upstream: 'openai', model: 'gpt-4.1-mini' } },
      cheap: { url: 'https://api.openai.com/v1', summarizer: { model: 'gpt-4.1-nano' } },
      elsewhere: { url: 'https://x.example/v1', summarizer: { url: 'https://summaries.example/v1' } },
      keyed: { url: 'https://y.example/v1', summarizer: { url: 'https://summaries.example/v1', apiKey: 'sk-summaries' } },
    },
  });
  const upstreams = resolveUpstreams(config);
  const of = (name: string) => summarizerDestination(config, upstreams, upstreams.named(name)!);

  it.each([
    ['openai', 'https://api.openai.com/v1', undefined, { kind: 'request' }],
    ['anthropic', 'https://api.anthropic.com/v1', undefined, { kind: 'request' }],
    // Another upstream by name: its own key, never the client's.
    ['local', 'https://api.openai.com/v1', 'gpt-4.1-mini', { kind: 'key', key: 'sk-openai' }],
    ['cheap', 'https://api.openai.com/v1', 'gpt-4.1-nano', { kind: 'request' }],
    // A URL elsewhere with no key of its own gets none.
    ['elsewhere', 'https://summaries.example/v1', undefined, { kind: 'none' }],
    ['keyed', 'https://summaries.example/v1', undefined, { kind: 'key', key: 'sk-summaries' }],
  ])('%s: %s, model %s, credential %j', (name, url, model, credential) => {
    expect(of(name)).toMatchObject({ url, model, credential });
  });

  it("the global summarizer key goes only where the global summarizer is, never to an upstream's own URL", () => {
    const withGlobal = validateConfig({
      summarizer: { url: 'https://s.example/v1', apiKey: 'sk-global' },
      upstreams: { a: { url: 'https://a.example/v1', summarizer: { url: 'https://b.example/v1' } }, c: { url: 'https://c.example/v1' } },
    });
    const u = resolveUpstreams(withGlobal);
    expect(summarizerDestination(withGlobal, u, u.named('a')!)).toMatchObject({
      url: 'https://b.example/v1',
      credential: { kind: 'none' },
    });
    expect(summarizerDestination(withGlobal, u, u.named('c')!)).toMatchObject({
      url: 'https://s.example/v1',
      credential: { kind: 'key', key: 'sk-global' },
    });
    // A single upstream keeps the old rule: the summarizer is that upstream, with the summarizer's key.
    const single = validateConfig({ upstream: { url: 'https://a.example/v1' }, summarizer: { apiKey: 'sk-single' } });
    const one = resolveUpstreams(single);
    expect(summarizerDestination(single, one, one.all[0])).toMatchObject({
      url: 'https://a.example/v1',
      credential: { kind: 'key', key: 'sk-single' },
    });
  });
});

describe("the gateway's own errors in each API's shape", () => {
  it.each([
    ['chat', { error: { message: 'm', type: 'invalid_request_error', code: 'no_upstream', param: null } }],
    ['responses', { error: { message: 'm', type: 'invalid_request_error', code: 'no_upstream', param: null } }],
    ['messages', { type: 'error', error: { type: 'not_found_error', message: 'm', code: 'no_upstream' } }],
    [
      'gemini',
      {
        error: {
          code: 404,
          message: 'm',
          status: 'NOT_FOUND',
          details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'NO_UPSTREAM', domain: 'compaction-gateway' }],
        },
      },
    ],
  ] as const)('%s', (api, body) => {
    expect(errorBodyFor(api, 'no_upstream', 'm')).toEqual(body);
  });

  it('maps statuses as Anthropic and Google name them', () => {
    const type = (code: Parameters<typeof errorBodyFor>[1]) => (errorBodyFor('messages', code) as { error: { type: string } }).error.type;
    const status = (code: Parameters<typeof errorBodyFor>[1]) =>
      (errorBodyFor('gemini', code) as { error: { status: string } }).error.status;
    expect([
      type('invalid_api_key'),
      type('request_too_large'),
      type('upstream_timeout'),
      type('upstream_unreachable'),
      type('bad_request'),
    ]).toEqual(['authentication_error', 'request_too_large', 'timeout_error', 'api_error', 'invalid_request_error']);
    expect([status('invalid_api_key'), status('upstream_timeout'), status('upstream_unreachable'), status('shutting_down')]).toEqual([
      'UNAUTHENTICATED',
      'DEADLINE_EXCEEDED',
      'UNAVAILABLE',
      'UNAVAILABLE',
    ]);
  });
});
