import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import type { ConfigInput } from '../../src/config/schema.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { agentRequest } from '../helpers/rescue.js';

/*
 * Who may read the status page, and who may read the conversation on it: with gateway keys, a
 * key (Bearer, x-api-key, or a browser's Basic sign-in) opens it and shows content; without, it
 * is open, and content shows only on a loopback gateway asked by a loopback name; the switch
 * turns content off for everyone. The page tells which, and why.
 */

const GATEWAY_KEY = 'gw-key-1';
const METRICS_KEY = 'metrics-key-1';
/** The client's own x-request-id: a header value, shown only where content is. */
const REQUEST_ID = 'client-chosen-id-1';

let provider: StandIn;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

/** A gateway with `config` on top of the stand-in, after one rescued request; the summary that request's replay carried. */
async function afterRescue(config: ConfigInput, clientKey = 'sk-client'): Promise<string> {
  provider = await startStandIn({ limitBytes: 60_000, reply: () => ({ text: 'ok' }) });
  gateway = await startGateway({
    upstream: { url: provider.baseUrl, apiKey: 'sk-upstream' },
    summarizer: { maxInputTokens: 500_000 },
    ...config,
  });
  await new OpenAI({
    baseURL: gateway.baseUrl,
    apiKey: clientKey,
    maxRetries: 0,
    defaultHeaders: { 'x-request-id': REQUEST_ID },
  }).chat.completions.create(agentRequest(60) as never);
  const replay = provider.calls('chat')[1];
  const summary = /SUMMARY of \d+ chars[^"\\]*/.exec(JSON.stringify(replay.json.messages));
  expect(summary).not.toBeNull();
  return summary![0];
}

/** GET over a plain socket, with any Host header (fetch would not send one of ours). */
function get(
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const url = new URL(path, gateway.origin);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end();
  });
}

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('with gateway keys', () => {
  const config = { auth: { keys: [GATEWAY_KEY], metricsKey: METRICS_KEY }, server: { host: '0.0.0.0' } };

  it.each(['/status', '/status.json', '/status.js', '/status.css'])(
    '%s without a key: 401 in OpenAI shape, and a browser is asked to sign in',
    async (path) => {
      await afterRescue(config, GATEWAY_KEY);
      const res = await get(path);
      expect(res.status).toBe(401);
      expect(JSON.parse(res.text)).toEqual({
        error: { message: expect.any(String), type: 'authentication_error', code: 'invalid_api_key', param: null },
      });
      expect(res.headers['www-authenticate']).toMatch(/^Basic realm="[^"]+", charset="UTF-8"$/);
    },
  );

  it.each([
    ['the metrics key', { authorization: `Bearer ${METRICS_KEY}` }],
    ['a wrong Basic password', { authorization: basic('me', 'nope') }],
    ['the key as the Basic user name', { authorization: basic(GATEWAY_KEY, '') }],
  ])('%s does not open it', async (_name, headers) => {
    await afterRescue(config, GATEWAY_KEY);
    expect((await get('/status.json', headers)).status).toBe(401);
  });

  it.each([
    ['a Bearer token', { authorization: `Bearer ${GATEWAY_KEY}` }],
    ['x-api-key', { 'x-api-key': GATEWAY_KEY }],
    ['a Basic sign-in (any user name)', { authorization: basic('anyone', GATEWAY_KEY) }],
  ])('%s opens it, and shows content even beyond loopback', async (_name, headers) => {
    const summary = await afterRescue(config, GATEWAY_KEY);
    const res = await get('/status.json', headers);
    expect(res.status).toBe(200);
    const doc = JSON.parse(res.text);
    expect(doc.content).toEqual({ shown: true, why: 'this request carries a gateway key' });
    expect(doc.recent.entries[0].content.summary).toBe(summary);
    expect(doc.recent.entries[0].requestId).toBe(REQUEST_ID);
    expect(doc.gateway.auth).toEqual({ gatewayKeys: true, metricsKey: true });
    const page = await get('/status', headers);
    expect(page.status).toBe(200);
    expect(page.text).toContain(summary);
    expect(page.text).not.toContain(GATEWAY_KEY);
    expect(res.text).not.toContain(GATEWAY_KEY);
  });

  it('a Basic sign-in opens the page only: the API still wants a key it knows', async () => {
    await afterRescue(config, GATEWAY_KEY);
    const res = await fetch(`${gateway.baseUrl}/models`, { headers: { authorization: basic('anyone', GATEWAY_KEY) } });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBeNull();
  });
});

describe('without gateway keys', () => {
  it('on loopback: content shown to a loopback name, hidden from any other (a rebound DNS name)', async () => {
    const summary = await afterRescue({});
    for (const host of ['127.0.0.1', `127.0.0.1:${new URL(gateway.origin).port}`, 'localhost:8080', '[::1]:8080']) {
      const doc = JSON.parse((await get('/status.json', { host })).text);
      expect(doc.content.shown, host).toBe(true);
      expect(doc.recent.entries[0].content.summary).toBe(summary);
    }
    for (const host of ['attacker.example', 'attacker.example:8080', '127.0.0.1.nip.io']) {
      for (const path of ['/status.json', '/status']) {
        const res = await get(path, { host });
        expect(res.status).toBe(200);
        expect(res.text).not.toContain('SUMMARY of');
        expect(res.text).toContain('not a loopback name');
      }
    }
  });

  it('beyond loopback: the page is open, without content, and says why', async () => {
    const summary = await afterRescue({ server: { host: '0.0.0.0' }, auth: { allowOpen: true } });
    const res = await get('/status.json', { host: '127.0.0.1' });
    expect(res.status).toBe(200);
    const doc = JSON.parse(res.text);
    expect(doc.content).toEqual({
      shown: false,
      why: expect.stringContaining('listens on 0.0.0.0, beyond loopback, and asks for no gateway key'),
    });
    expect(doc.recent.entries[0]).toMatchObject({ outcome: 'replayed', strategy: 'summarize' });
    expect(doc.recent.entries[0]).not.toHaveProperty('content');
    // The request id may be the client's own x-request-id: a header value, kept from anyone unknown.
    expect(doc.recent.entries[0]).not.toHaveProperty('requestId');
    expect(res.text).not.toContain(summary);
    const page = await get('/status', { host: '127.0.0.1' });
    expect(page.text).not.toContain(summary);
    for (const text of [res.text, page.text]) expect(text).not.toContain(REQUEST_ID);
    expect(page.text).toContain('The summary and trail are not shown here.');
  });
});

describe('status.content: false', () => {
  it('shows no content, even with a key on loopback', async () => {
    const summary = await afterRescue({ auth: { keys: [GATEWAY_KEY] }, status: { content: false } }, GATEWAY_KEY);
    const res = await get('/status.json', { authorization: `Bearer ${GATEWAY_KEY}` });
    const doc = JSON.parse(res.text);
    expect(doc.content).toEqual({ shown: false, why: expect.stringContaining('status.content is off') });
    expect(doc.recent.entries[0]).not.toHaveProperty('content');
    expect(res.text).not.toContain(summary);
  });
});

describe('status.enabled: false', () => {
  it('serves no page', async () => {
    await afterRescue({ status: { enabled: false } });
    for (const path of ['/status', '/status.json']) {
      const res = await get(path);
      expect(res.status).toBe(404);
      expect(JSON.parse(res.text).error.code).toBe('not_found');
    }
  });
});

it('the page and its files: types, no caching, a policy that runs nothing but its own script', async () => {
  await afterRescue({});
  const types: Record<string, RegExp> = {
    '/status': /^text\/html; charset=utf-8$/,
    '/status.json': /^application\/json/,
    '/status.js': /^text\/javascript/,
    '/status.css': /^text\/css/,
  };
  for (const [path, type] of Object.entries(types)) {
    const res = await get(path);
    expect(res.status, path).toBe(200);
    expect(res.headers['content-type'], path).toMatch(type);
    expect(res.headers['cache-control'], path).toBe('no-store');
    expect(res.headers['x-content-type-options'], path).toBe('nosniff');
    expect(res.headers['content-security-policy'], path).toMatch(/default-src 'none'; script-src 'self'; style-src 'self'/);
  }
  const page = (await get('/status')).text;
  // No inline script or style for the policy to refuse.
  expect(page).not.toMatch(/<script>|<script [^>]*>[^<]|style=|<style/);
  // The status page's polls log at debug, as probes do: nothing at info.
  await get('/status.json');
  expect(gateway.logLines().filter((l) => l.level >= 30 && /^\/status/.test(String(l.path)))).toEqual([]);
});
