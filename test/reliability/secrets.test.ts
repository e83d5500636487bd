import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { completion, json, sse, startFakeUpstream, streamEvents, type FakeUpstream, type Received } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest } from '../helpers/rescue.js';
import { Client, deadPort, overlongError, rawHttp, rawStatus } from './helpers.js';

/*
 * Credentials: never in a log line, whatever path a request takes; the gateway's own keys
 * checked on every route that reaches the upstream; the summarizer only ever talks to its URL.
 */

const CLIENT_KEY = 'sk-client-SECRET-aaaaaaaaaaaa';
const AZURE_KEY = 'azure-SECRET-bbbbbbbbbbbb';
const ANTHROPIC_KEY = 'x-api-SECRET-cccccccccccc';
const UPSTREAM_KEY = 'sk-upstream-SECRET-dddddddddddd';
const GATEWAY_KEY = 'gw-SECRET-eeeeeeeeeeee';
const SUMMARIZER_KEY = 'sk-summarizer-SECRET-ffffffffffff';
const QUERY_KEY = 'query-SECRET-gggggggggggg';
const ALL = [CLIENT_KEY, AZURE_KEY, ANTHROPIC_KEY, UPSTREAM_KEY, GATEWAY_KEY, SUMMARIZER_KEY, QUERY_KEY];

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const clientCredentials = { authorization: `Bearer ${CLIENT_KEY}`, 'api-key': AZURE_KEY, 'x-api-key': ANTHROPIC_KEY };

let upstream: FakeUpstream | undefined;
let summarizerHost: FakeUpstream | undefined;
let gateway: TestGateway | undefined;
let client = new Client();
afterEach(async () => {
  // The client first: a pooled connection that never carried a request holds app.close() open.
  await client.close();
  client = new Client();
  await gateway?.close();
  await upstream?.close();
  await summarizerHost?.close();
  gateway = upstream = summarizerHost = undefined;
});

function expectNoSecrets(text: string): void {
  expect(text.length).toBeGreaterThan(0);
  for (const secret of ALL) expect(text, `log contains ${secret}`).not.toContain(secret);
  // Nor a recognisable piece of one.
  expect(text).not.toMatch(/SECRET-[a-g]{6}/);
}

/** An upstream whose behaviour depends on the path the test asks for, echoing credentials in its errors. */
function hostileUpstream(): (req: Received, res: import('node:http').ServerResponse) => void | Promise<void> {
  return async (req, res) => {
    const echo = `${req.headers.authorization} ${req.headers['api-key']} ${req.headers['x-api-key']}`;
    if (req.headers['x-gateway-compaction'] === 'summarizer') {
      return json(res, 401, { error: { message: `Incorrect API key provided: ${echo}`, code: 'invalid_api_key' } });
    }
    const mode = String(req.headers['x-test-mode'] ?? '');
    if (mode === 'reset') return void res.socket!.resetAndDestroy();
    if (mode === 'stall') return void res.writeHead(200, { 'content-type': 'application/json' }).flushHeaders();
    if (mode === 'cut') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(streamEvents(['a'])[0]);
      return void setTimeout(() => res.socket?.destroy(), 20);
    }
    if (mode === 'garbage') return void res.socket!.end(`HTTP/1.1 ${echo}\r\n\r\n`);
    if (mode === 'error') return json(res, 401, { error: { message: `Incorrect API key provided: ${echo}` } });
    if (req.body.length > 60_000) return json(res, 400, overlongError(req.body.length));
    return req.json?.stream ? sse(res, streamEvents(['ok'])) : json(res, 200, completion('ok'));
  };
}

describe('secrets never reach a log line', () => {
  it.each([
    ['the client credentials forwarded', {}],
    ['upstream.apiKey in their place', { upstream: { apiKey: UPSTREAM_KEY } }],
    [
      'gateway keys and a summarizer key',
      { upstream: { apiKey: UPSTREAM_KEY }, auth: { keys: [GATEWAY_KEY] }, summarizer: { apiKey: SUMMARIZER_KEY } },
    ],
  ])('on every error path, with %s', async (_name, extra) => {
    upstream = await startFakeUpstream(hostileUpstream());
    gateway = await startGateway({
      ...extra,
      upstream: { url: upstream.baseUrl, idleTimeoutMs: 200, ...(extra as { upstream?: object }).upstream },
      summarizer: { maxInputTokens: 500_000, ...(extra as { summarizer?: object }).summarizer },
      log: { level: 'trace' },
    });
    const keyed = 'auth' in extra ? { authorization: `Bearer ${GATEWAY_KEY}` } : clientCredentials;
    const url = `${gateway.baseUrl}/chat/completions`;
    const calls: Array<Promise<unknown>> = [];
    for (const mode of ['', 'reset', 'stall', 'cut', 'garbage', 'error']) {
      calls.push(client.post(url, chat, { ...keyed, 'x-test-mode': mode }).catch(() => undefined));
      calls.push(client.post(url, { ...chat, stream: true }, { ...keyed, 'x-test-mode': mode }).catch(() => undefined));
    }
    // The rescue path, with a summarizer that echoes the credentials it got in its error.
    calls.push(client.post(url, agentRequest(60), keyed));
    // Passthrough, bad keys, bad bodies, a query-string key.
    calls.push(fetch(`${gateway.baseUrl}/models?key=${QUERY_KEY}`, { headers: keyed }).then((r) => r.text()));
    calls.push(fetch(`${gateway.baseUrl}/models`, { headers: { ...keyed, 'x-test-mode': 'reset' } }).then((r) => r.text()));
    calls.push(client.post(url, chat, { authorization: `Bearer ${GATEWAY_KEY}x`, 'api-key': AZURE_KEY }));
    calls.push(client.post(url, '{"broken', keyed));
    calls.push(client.post(`${url}?api-key=${QUERY_KEY}`, chat, keyed));
    await Promise.all(calls);
    // A client that gives up while the upstream is silent.
    await client.post(url, chat, { ...keyed, 'x-test-mode': 'stall' }, AbortSignal.timeout(50)).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 300));
    expectNoSecrets(gateway.logText());
  });

  it('an upstream that is down', async () => {
    gateway = await startGateway({
      upstream: { url: `http://127.0.0.1:${await deadPort()}/v1`, apiKey: UPSTREAM_KEY },
      log: { level: 'trace' },
    });
    await client.post(`${gateway.baseUrl}/chat/completions`, chat, clientCredentials);
    await (await fetch(`${gateway.baseUrl}/models`, { headers: clientCredentials })).text();
    expectNoSecrets(gateway.logText());
  });

  it('the process startup line and a bad config say nothing secret (built gateway, dist/)', async () => {
    const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
    const start = (env: Record<string, string>) =>
      new Promise<string>((resolve) => {
        const child = spawn(process.execPath, [main], { env: { PATH: process.env.PATH ?? '', PORT: '0', LOG_LEVEL: 'trace', ...env } });
        let out = '';
        child.stdout.on('data', (c) => (out += c));
        child.stderr.on('data', (c) => (out += c));
        child.once('exit', () => resolve(out));
        const ready = setInterval(() => {
          if (/gateway ready/.test(out)) child.kill('SIGTERM');
        }, 20);
        child.once('exit', () => clearInterval(ready));
        setTimeout(() => child.kill('SIGKILL'), 8_000);
      });
    const running = await start({
      UPSTREAM_URL: `http://user:${QUERY_KEY}@127.0.0.1:9/v1?api-key=${QUERY_KEY}`,
      UPSTREAM_API_KEY: UPSTREAM_KEY,
      GATEWAY_API_KEYS: `${GATEWAY_KEY},other-${GATEWAY_KEY}`,
      SUMMARIZER_API_KEY: SUMMARIZER_KEY,
      SUMMARIZER_URL: `http://u:${QUERY_KEY}@127.0.0.1:9/v1`,
    });
    expect(running).toMatch(/gateway ready/);
    expect(running).toMatch(/"url":"http:\/\/127\.0\.0\.1:9\/v1"/);
    expectNoSecrets(running);
    const refused = await start({
      UPSTREAM_URL: `http://user:${QUERY_KEY}@127.0.0.1:99999/v1`,
      UPSTREAM_API_KEY: UPSTREAM_KEY,
      SUMMARIZER_API_KEY: '',
    });
    expect(refused).toMatch(/invalid configuration/);
    expectNoSecrets(refused);
  });
});

describe('the gateway keys', () => {
  const OTHER_KEY = 'gw-second-key-0000000000';

  async function keyed() {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('ok')));
    gateway = await startGateway({ upstream: { url: upstream.baseUrl, apiKey: UPSTREAM_KEY }, auth: { keys: [GATEWAY_KEY, OTHER_KEY] } });
    return gateway;
  }

  it.each<[string, Record<string, string>, number]>([
    ['no Authorization', {}, 401],
    ['an empty Bearer', { authorization: 'Bearer ' }, 401],
    ['the scheme only', { authorization: 'Bearer' }, 401],
    ['Basic instead of Bearer', { authorization: `Basic ${GATEWAY_KEY}` }, 401],
    ['the key without a scheme', { authorization: GATEWAY_KEY }, 401],
    ['a prefix of the key', { authorization: `Bearer ${GATEWAY_KEY.slice(0, -1)}` }, 401],
    ['the key plus a byte', { authorization: `Bearer ${GATEWAY_KEY}x` }, 401],
    ['the key in another case', { authorization: `Bearer ${GATEWAY_KEY.toUpperCase()}` }, 401],
    ['the key in api-key instead', { 'api-key': GATEWAY_KEY }, 401],
    ['the upstream key', { authorization: `Bearer ${UPSTREAM_KEY}` }, 401],
    ['the right key', { authorization: `Bearer ${GATEWAY_KEY}` }, 200],
    ['the second key', { authorization: `Bearer ${OTHER_KEY}` }, 200],
    ['lowercase bearer, extra spaces', { authorization: `bearer   ${GATEWAY_KEY}  ` }, 200],
    // Anthropic's clients (Claude Code with ANTHROPIC_API_KEY) send it as x-api-key
    ['the key in x-api-key instead', { 'x-api-key': GATEWAY_KEY }, 200],
    ['a wrong x-api-key', { 'x-api-key': `${GATEWAY_KEY}x` }, 401],
  ])('%s, on chat and passthrough', async (_name, headers, status) => {
    const gw = await keyed();
    const res = await client.post(`${gw.baseUrl}/chat/completions`, chat, headers);
    expect(res.status).toBe(status);
    const models = await fetch(`${gw.baseUrl}/models`, { headers });
    await models.text();
    expect(models.status).toBe(status);
    if (status === 401) {
      expect(res.json.error).toMatchObject({ code: 'invalid_api_key', type: 'authentication_error' });
      expect(upstream!.received).toEqual([]);
    } else {
      // The gateway key is never forwarded: the upstream gets upstream.apiKey.
      for (const got of upstream!.received) {
        expect(got.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
        expect(JSON.stringify(got.headers)).not.toContain(GATEWAY_KEY);
      }
    }
  });

  it.each(['/%76%31/models', '/%76%31/files?purpose=batch', '/v1?x=1', '/v1', '//v1/models', '/V1/models', '/v1%2fmodels'])(
    'GET %s without a key never reaches the upstream',
    async (path) => {
      await keyed();
      const res = rawStatus(await rawHttp(gateway!.origin, `GET ${path} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n`));
      expect([400, 401, 404]).toContain(res.status);
      expect(upstream!.received).toEqual([]);
    },
  );

  /*
   * BUG (src/server.ts, addKeyCheck; not this suite's to fix): the key check skips any URL that
   * does not literally start with `/v1/`, but the router matches percent-decoded paths, so
   * `POST /%76%31/chat/completions` runs the chat route with no key and the upstream gets
   * upstream.apiKey. (Passthrough paths are now refused in routes/passthrough.ts.) Fix: decide by
   * the matched route, not the raw URL: skip only `request.routeOptions.url` in
   * {'/healthz', '/readyz', '/metrics'} (unmatched URLs then get 401 before 404, which is fine).
   */
  it('POST /%76%31/chat/completions without a key never reaches the upstream', async () => {
    await keyed();
    const body = JSON.stringify(chat);
    const res = rawStatus(
      await rawHttp(
        gateway!.origin,
        `POST /%76%31/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      ),
    );
    expect(upstream!.received).toEqual([]);
    expect(res.status).toBe(401);
  });

  it('health, readiness and metrics stay open for probes', async () => {
    const gw = await keyed();
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      const res = await fetch(`${gw.origin}${path}`);
      await res.text();
      expect(res.status).toBe(200);
    }
  });
});

describe('the summarizer call and credentials', () => {
  /** The upstream rejects the first attempt as overlong; a separate host plays the summarizer. */
  async function split(
    summarizerConfig: Record<string, unknown>,
    summarizer?: (req: Received, res: import('node:http').ServerResponse) => void,
  ) {
    upstream = await startFakeUpstream(hostileUpstream());
    summarizerHost = await startFakeUpstream(summarizer ?? ((_req, res) => json(res, 200, completion('SUMMARY'))));
    gateway = await startGateway({
      upstream: { url: upstream.baseUrl },
      summarizer: { url: summarizerHost.baseUrl, maxInputTokens: 500_000, ...summarizerConfig },
    });
  }

  const credentialHeaders = (r: Received) =>
    JSON.stringify([r.headers.authorization, r.headers['api-key'], r.headers['x-api-key'], r.headers.cookie, r.headers['x-goog-api-key']]);

  it('with summarizer.apiKey, the summarizer host gets that key and none of the client credentials', async () => {
    await split({ apiKey: SUMMARIZER_KEY });
    const res = await client.post(`${gateway!.baseUrl}/chat/completions`, agentRequest(60), {
      ...clientCredentials,
      cookie: 'session=SECRET-cookie',
      'x-goog-api-key': 'SECRET-goog',
    });
    expect(res.status).toBe(200);
    expect(summarizerHost!.received).toHaveLength(1);
    const call = summarizerHost!.received[0];
    expect(call.headers.authorization).toBe(`Bearer ${SUMMARIZER_KEY}`);
    expect(credentialHeaders(call)).not.toMatch(/SECRET-(a|b|c|cookie|goog)/);
    // The upstream itself never sees the summarizer key.
    for (const got of upstream!.received) expect(JSON.stringify(got.headers)).not.toContain(SUMMARIZER_KEY);
  });

  it('without summarizer.apiKey, a summarizer on another origin gets none of the client credentials', async () => {
    await split({});
    await client.post(`${gateway!.baseUrl}/chat/completions`, agentRequest(60), {
      ...clientCredentials,
      host: 'evil.example',
      'x-forwarded-host': 'evil.example',
      cookie: 'session=SECRET-cookie',
    });
    expect(summarizerHost!.received).toHaveLength(1);
    const call = summarizerHost!.received[0];
    expect(call.url).toBe('/v1/chat/completions');
    expect(call.headers.host).toBe(new URL(summarizerHost!.origin).host);
    expect(call.headers.authorization).toBeUndefined();
    expect(call.headers.cookie).toBeUndefined();
    expect(call.headers['x-forwarded-host']).toBeUndefined();
  });

  it('a summarizer redirecting elsewhere is not followed: the credentials stay put, the fallback compacts', async () => {
    const elsewhere = await startFakeUpstream((_req, res) => json(res, 200, completion('stolen')));
    try {
      await split({}, (_req, res) => {
        res.writeHead(307, { location: `${elsewhere.baseUrl}/chat/completions`, 'content-length': '0' });
        res.end();
      });
      const res = await client.post(`${gateway!.baseUrl}/chat/completions`, agentRequest(60), clientCredentials);
      expect(res.status).toBe(200);
      expect(res.headers['x-gateway-compaction']).toMatch(/strategy=fallback/);
      expect(elsewhere.received).toEqual([]);
    } finally {
      await elsewhere.close();
    }
  });
});
