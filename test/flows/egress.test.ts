import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { APIError } from 'openai';
import { stringify } from 'yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream } from '../helpers/fake-upstream.js';
import { startForwardProxy, type ForwardProxy } from '../helpers/forward-proxy.js';
import { jsonLines, listening, runGateway, type Proc } from '../helpers/process.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';
import { makePrivateCa, startTlsStandin, type PrivateCa, type TlsStandin } from '../helpers/tls-standin.js';

/*
 * Egress as a company network has it: the built gateway reaches an https:// provider whose
 * certificate a private CA signed, through a forward proxy named by HTTPS_PROXY (or by the
 * upstream's own `proxy`), or straight there when NO_PROXY or `proxy: none` says so. What the
 * proxy saw and what the provider saw are compared connection by connection: a request the
 * provider received came through the proxy exactly when its peer port is one of the proxy's
 * outbound sockets. The proxy variables go only to the gateway's environment, never this one's.
 */

const LIMIT_BYTES = 60_000;
const CLIENT_KEY = 'sk-client-egress';
const PROXY_USER = 'user';
// Distinctive, so that finding it in the output cannot be a coincidence.
const PROXY_PASSWORD = 'pw-egress-Q7v';

let ca: PrivateCa;
let workDir: string;
beforeAll(() => {
  ca = makePrivateCa();
  workDir = mkdtempSync(join(tmpdir(), 'egress-config-'));
});
afterAll(() => {
  ca.remove();
  rmSync(workDir, { recursive: true, force: true });
});

/** Everything a test started, stopped after it whatever happened. */
const started: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

async function standin(): Promise<TlsStandin> {
  const s = await startTlsStandin({ ca, limitBytes: LIMIT_BYTES });
  started.push(s);
  return s;
}

async function proxy(credentials?: { user: string; password: string }): Promise<ForwardProxy> {
  const p = await startForwardProxy({ credentials });
  started.push(p);
  return p;
}

interface Gateway {
  proc: Proc;
  baseUrl: string;
  /** The `gateway ready` line. */
  ready: any;
}

let configs = 0;
/** The built gateway with this config file and nothing in its environment but PATH and `env`. */
async function gateway(config: object, env: Record<string, string> = {}): Promise<Gateway> {
  const file = join(workDir, `config-${++configs}.yaml`);
  writeFileSync(file, stringify(config));
  const proc = runGateway(['--config', file], { PORT: '0', LOG_LEVEL: 'info', ...env });
  started.push({ close: async () => void proc.child.kill('SIGKILL') });
  const origin = await listening(proc);
  await expect.poll(() => jsonLines(proc).some((l) => l.msg === 'gateway ready'), { timeout: 10_000 }).toBe(true);
  return { proc, baseUrl: `${origin}/v1`, ready: jsonLines(proc).find((l) => l.msg === 'gateway ready') };
}

/** How the startup line says one upstream's traffic leaves: `direct (why)` or `PROXY-ORIGIN (why)`. */
function proxyOf(ready: any, name: string): string {
  const entry = (ready.upstreams as any[]).find((u) => u.name === name);
  expect(entry, `upstream ${name} in the startup line's upstreams: ${JSON.stringify(ready.upstreams)}`).toBeDefined();
  return entry.proxy;
}

const sdk = (baseURL: string) => new OpenAI({ baseURL, apiKey: CLIENT_KEY, maxRetries: 0, timeout: 15_000 });
const hello = { model: 'fake-model', messages: [{ role: 'user' as const, content: 'hi' }] };

/** Whether every request the stand-in received came over one of the proxy's tunnels. */
const allThrough = (s: TlsStandin, p: ForwardProxy) => s.received.every((r) => p.outboundPorts().has(r.remotePort));

describe('with HTTPS_PROXY and HTTP_PROXY set', () => {
  it('an https upstream with a caFile is reached through a CONNECT tunnel; proxy: none beside it goes direct; http goes by HTTP_PROXY', async () => {
    const [viaProxy, direct] = [await standin(), await standin()];
    const plain = await startFakeUpstream();
    started.push(plain);
    const [httpsProxy, httpProxy] = [await proxy(), await proxy()];
    const gw = await gateway(
      {
        upstream: { url: viaProxy.baseUrl, caFile: ca.caPem },
        upstreams: {
          direct: { url: direct.baseUrl, caFile: ca.caPem, proxy: 'none' },
          plain: { url: plain.baseUrl },
        },
      },
      { HTTPS_PROXY: httpsProxy.origin, HTTP_PROXY: httpProxy.origin },
    );

    const answer = await sdk(gw.baseUrl).chat.completions.create(hello);
    expect(answer.choices[0].message.content).toBe('answered over tls');
    expect(viaProxy.received).toHaveLength(1);
    expect(viaProxy.received[0].headers.authorization).toBe(`Bearer ${CLIENT_KEY}`);
    expect(httpsProxy.connects().map((c) => c.target)).toEqual([`127.0.0.1:${viaProxy.port}`]);
    expect(httpsProxy.seen.every((c) => c.method === 'CONNECT' && c.status === 200 && !c.authorized)).toBe(true);
    expect(allThrough(viaProxy, httpsProxy)).toBe(true);
    // A pass-through path leaves the same way.
    expect((await sdk(gw.baseUrl).models.list()).data.map((m) => m.id)).toEqual(['fake-model']);
    expect(viaProxy.received.map((r) => r.path)).toEqual(['/v1/chat/completions', '/v1/models']);
    expect(allThrough(viaProxy, httpsProxy)).toBe(true);

    expect((await sdk(`${gw.baseUrl.replace(/\/v1$/, '')}/direct/v1`).chat.completions.create(hello)).choices[0].message.content).toBe(
      'answered over tls',
    );
    expect(direct.received).toHaveLength(1);
    expect([...httpsProxy.seen, ...httpProxy.seen].map((c) => c.target)).not.toContain(`127.0.0.1:${direct.port}`);

    expect((await sdk(`${gw.baseUrl.replace(/\/v1$/, '')}/plain/v1`).chat.completions.create(hello)).choices[0].message.content).toBe('ok');
    expect(plain.received).toHaveLength(1);
    // undici tunnels plain http through CONNECT too; a proxy that forwards absolute-form would do as well.
    expect(httpProxy.seen.map((c) => c.target)).toEqual([`127.0.0.1:${new URL(plain.origin).port}`]);
    expect(httpsProxy.seen.map((c) => c.target)).not.toContain(`127.0.0.1:${new URL(plain.origin).port}`);

    expect(proxyOf(gw.ready, 'default')).toBe(`${httpsProxy.origin} (HTTPS_PROXY)`);
    expect(proxyOf(gw.ready, 'direct')).toMatch(/^direct \(.*proxy: none.*\)$/);
    expect(proxyOf(gw.ready, 'plain')).toBe(`${httpProxy.origin} (HTTP_PROXY)`);
  });

  it('an overlong request is rescued, and its summarizer call goes through the proxy too', async () => {
    const provider = await standin();
    const httpsProxy = await proxy();
    // Window discovery off: the calls counted here are the rescue's (discovery's go the same way, through egress).
    const gw = await gateway(
      { upstream: { url: provider.baseUrl, caFile: ca.caPem, discoverWindows: false } },
      { HTTPS_PROXY: httpsProxy.origin },
    );

    const body = agentRequest(60) as any;
    expect(JSON.stringify(body).length).toBeGreaterThan(LIMIT_BYTES);
    const { data, response } = await sdk(gw.baseUrl).chat.completions.create(body).withResponse();
    expect(data.choices[0].message.content).toBe('answered over tls');
    expect(parseCompactionHeader(response.headers.get('x-gateway-compaction'))).toMatchObject({
      outcome: 'replayed',
      strategy: 'summarize',
    });

    // The refused attempt, at least one summary, the replay: every one of them over a tunnel.
    const [refused, ...rest] = provider.mainCalls();
    expect(refused.status).toBe(400);
    expect(rest.map((c) => c.status)).toEqual([200]);
    expect(provider.summarizerCalls().length).toBeGreaterThanOrEqual(1);
    expect(provider.received.length).toBe(2 + provider.summarizerCalls().length);
    expect(allThrough(provider, httpsProxy)).toBe(true);
    expect(provider.summarizerCalls().every((c) => httpsProxy.outboundPorts().has(c.remotePort))).toBe(true);
    expect(httpsProxy.connects().every((c) => c.target === `127.0.0.1:${provider.port}`)).toBe(true);
  });

  it('NO_PROXY=127.0.0.1: the upstream is reached directly and the proxy sees nothing', async () => {
    const provider = await standin();
    const httpsProxy = await proxy();
    const gw = await gateway(
      { upstream: { url: provider.baseUrl, caFile: ca.caPem } },
      { HTTPS_PROXY: httpsProxy.origin, NO_PROXY: '127.0.0.1' },
    );

    expect((await sdk(gw.baseUrl).chat.completions.create(hello)).choices[0].message.content).toBe('answered over tls');
    expect(provider.received).toHaveLength(1);
    expect(httpsProxy.seen).toEqual([]);
    expect(proxyOf(gw.ready, 'default')).toMatch(/^direct \(.*NO_PROXY.*\)$/);
  });
});

describe("an upstream's own proxy", () => {
  it('overrides HTTPS_PROXY, sends its Basic credentials to that proxy alone, and the password is never printed', async () => {
    const [good, refused] = [await standin(), await standin()];
    const envProxy = await proxy();
    const authProxy = await proxy({ user: PROXY_USER, password: PROXY_PASSWORD });
    const gw = await gateway(
      {
        upstream: { url: good.baseUrl, caFile: ca.caPem, proxy: authProxy.url(PROXY_USER, PROXY_PASSWORD) },
        upstreams: {
          // The same proxy with the wrong password: its 407 must end as an error for the client, not a hang.
          wrong: { url: refused.baseUrl, caFile: ca.caPem, proxy: authProxy.url(PROXY_USER, 'not-the-password') },
        },
      },
      { HTTPS_PROXY: envProxy.origin },
    );

    expect((await sdk(gw.baseUrl).chat.completions.create(hello)).choices[0].message.content).toBe('answered over tls');
    expect(good.received).toHaveLength(1);
    expect(allThrough(good, authProxy)).toBe(true);
    const tunnels = authProxy.connects().filter((c) => c.target === `127.0.0.1:${good.port}`);
    expect(tunnels.length).toBeGreaterThanOrEqual(1);
    expect(tunnels.every((c) => c.authorized && c.user === PROXY_USER && c.status === 200)).toBe(true);

    const t0 = performance.now();
    const failure = await sdk(`${gw.baseUrl.replace(/\/v1$/, '')}/wrong/v1`)
      .chat.completions.create(hello)
      .catch((e: unknown) => e);
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(failure).toBeInstanceOf(APIError);
    expect((failure as APIError).status).toBeGreaterThanOrEqual(500);
    expect((failure as APIError).type).toBe('upstream_error');
    expect(refused.received).toEqual([]);
    expect(authProxy.seen.filter((c) => c.target === `127.0.0.1:${refused.port}`).map((c) => c.status)).toContain(407);

    expect(envProxy.seen).toEqual([]);
    expect(proxyOf(gw.ready, 'default')).toMatch(new RegExp(`^${authProxy.origin} \\(`));
    expect(proxyOf(gw.ready, 'wrong')).toMatch(new RegExp(`^${authProxy.origin} \\(`));
    expect(JSON.stringify(gw.ready)).not.toContain(PROXY_PASSWORD);
    expect(JSON.stringify(gw.ready)).not.toContain(`${PROXY_USER}:`);
    expect(gw.proc.output()).not.toContain(PROXY_PASSWORD);
    expect(gw.proc.output()).not.toContain('not-the-password');
  });
});

describe('a private CA', () => {
  it("without a caFile or NODE_EXTRA_CA_CERTS the certificate is refused: a 502 in OpenAI's shape, at once", async () => {
    const provider = await standin();
    const gw = await gateway({ upstream: { url: provider.baseUrl } });

    const res = await fetch(`${gw.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
      body: JSON.stringify(hello),
      signal: AbortSignal.timeout(10_000),
    });
    expect(res.status).toBe(502);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = await res.json();
    expect(body).toEqual({
      error: {
        message: expect.any(String),
        type: 'upstream_error',
        code: expect.stringMatching(/^upstream_(unreachable|bad_response)$/),
        param: null,
      },
    });
    // The handshake failed on the gateway's side: nothing reached the provider's HTTP layer.
    expect(provider.received).toEqual([]);
    expect(provider.handshakes()).toBe(0);
  });

  it("NODE_EXTRA_CA_CERTS in the gateway's environment trusts it without a caFile", async () => {
    const provider = await standin();
    const gw = await gateway({ upstream: { url: provider.baseUrl } }, { NODE_EXTRA_CA_CERTS: ca.caPem });

    expect((await sdk(gw.baseUrl).chat.completions.create(hello)).choices[0].message.content).toBe('answered over tls');
    expect(provider.received).toHaveLength(1);
  });
});
