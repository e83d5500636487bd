import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import type { ServerResponse } from 'node:http';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { message } from '../helpers/anthropic.js';
import { completion, json, startFakeUpstream, type FakeUpstream, type Received } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest, isSummarizer, parseCompactionHeader } from '../helpers/rescue.js';

/*
 * The credentials a rescued request carries (the gateway's upstream key, or the client's own)
 * belong to the upstream. A summarizer on another origin (another port here: another origin as
 * a browser counts them) without `summarizer.apiKey` gets none of them, in any header or in the
 * query; on the upstream's own origin it gets them as before; with `summarizer.apiKey`, that key.
 */

const LIMIT = 40_000;
const CLIENT_KEY = 'sk-client-SECRET-1111';
const UPSTREAM_KEY = 'sk-upstream-SECRET-2222';
const SUMMARIZER_KEY = 'sk-summarizer-SECRET-3333';
const MODEL = 'gemini-test';

let upstream: FakeUpstream | undefined;
let summarizer: FakeUpstream | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
  await summarizer?.close();
  gateway = upstream = summarizer = undefined;
});

/** A summary, in the API the call came in. */
function summaryAnswer(req: Received, res: ServerResponse): void {
  if (req.url.includes(':generateContent'))
    return json(res, 200, { candidates: [{ content: { role: 'model', parts: [{ text: 'SUMMARY' }] }, finishReason: 'STOP' }] });
  if (req.url.endsWith('/messages')) return json(res, 200, message('SUMMARY', 10, 'msg_summary'));
  return json(res, 200, completion('SUMMARY'));
}

/** A provider of all three APIs with a small window; summarizer calls (on any path) get a summary. */
function provider(req: Received, res: ServerResponse): void {
  if (isSummarizer(req)) return summaryAnswer(req, res);
  const tokens = Math.ceil(req.body.length / 4);
  if (req.url.includes(':generateContent')) {
    if (req.body.length > LIMIT)
      return json(res, 400, {
        error: {
          code: 400,
          message: `The input token count (${tokens}) exceeds the maximum number of tokens allowed (${LIMIT / 4}).`,
          status: 'INVALID_ARGUMENT',
        },
      });
    return json(res, 200, { candidates: [{ content: { role: 'model', parts: [{ text: 'rescued answer' }] }, finishReason: 'STOP' }] });
  }
  if (req.url.startsWith('/v1/messages')) {
    if (req.body.length > LIMIT)
      return json(res, 400, {
        type: 'error',
        error: { type: 'invalid_request_error', message: `prompt is too long: ${tokens} tokens > ${LIMIT / 4} maximum` },
      });
    return json(res, 200, message('rescued answer', tokens));
  }
  if (req.body.length > LIMIT) {
    return json(res, 400, {
      error: {
        message: `This model's maximum context length is ${LIMIT / 4} tokens. However, your messages resulted in ${tokens} tokens.`,
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    });
  }
  json(res, 200, completion('rescued answer'));
}

/** The upstream, a summarizer on a port of its own, and the gateway between them. */
async function start(config: { upstreamKey?: string; summarizer?: Record<string, unknown>; gemini?: boolean } = {}) {
  upstream = await startFakeUpstream(provider);
  summarizer = await startFakeUpstream(summaryAnswer);
  const base = config.gemini ? upstream.origin : upstream.baseUrl;
  gateway = await startGateway({
    upstream: { url: base, ...(config.upstreamKey ? { apiKey: config.upstreamKey } : {}) },
    summarizer: { url: config.gemini ? summarizer.origin : summarizer.baseUrl, ...config.summarizer },
    compaction: { mask: false },
  });
}

const CREDENTIALS = ['authorization', 'api-key', 'x-api-key', 'x-goog-api-key', 'cookie', 'x-portkey-api-key'];
/** Every summarizer call went to the summarizer's own host, marked, with no credential in its headers or query. */
function expectNoCredentials(calls: Received[]): void {
  expect(calls.length).toBeGreaterThan(0);
  for (const call of calls) {
    expect(call.headers['x-gateway-compaction']).toBe('summarizer');
    for (const name of CREDENTIALS) expect(call.headers[name], name).toBeUndefined();
    expect(call.url).not.toMatch(/[?&]key=/);
    expect(JSON.stringify(call.headers)).not.toMatch(/SECRET/);
  }
}

const warnings = () => gateway!.logLines().filter((l) => l.level === 40 && /summarizer calls go there with no credential/.test(l.msg));

const chatSdk = (apiKey: string) => new OpenAI({ baseURL: gateway!.baseUrl, apiKey, maxRetries: 0 });

/** A Messages conversation over LIMIT: a task, tool rounds, a last question. */
function messagesConversation(): Anthropic.MessageParam[] {
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Fix the failing build.' }];
  for (let t = 0; t < 30; t++) {
    messages.push({
      role: 'assistant',
      content: [{ type: 'tool_use', id: `toolu_${t}`, name: 'read_file', input: { path: `src/f${t}.ts` } }],
    });
    messages.push({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: `toolu_${t}`, content: `file ${t}\n${'x'.repeat(2_000)}` }],
    });
  }
  messages.push({ role: 'user', content: 'And now?' });
  return messages;
}

/** The same in Gemini's contents. */
function geminiContents(dir = 'src') {
  const contents: Array<{ role: string; parts: Array<Record<string, unknown>> }> = [
    { role: 'user', parts: [{ text: `Fix the failing build in ${dir}.` }] },
  ];
  for (let t = 0; t < 30; t++) {
    contents.push({ role: 'model', parts: [{ functionCall: { id: `c${t}`, name: 'read_file', args: { path: `${dir}/f${t}.ts` } } }] });
    contents.push({
      role: 'user',
      parts: [{ functionResponse: { id: `c${t}`, name: 'read_file', response: { output: `${dir} file ${t}\n${'x'.repeat(2_000)}` } } }],
    });
  }
  contents.push({ role: 'user', parts: [{ text: 'And now?' }] });
  return contents;
}

describe('a summarizer on another origin, without summarizer.apiKey', () => {
  it("gets neither the client's Bearer key nor its api-key (OpenAI SDK), and a WARN says so once", async () => {
    await start();
    for (let i = 0; i < 2; i++) {
      const answer = await chatSdk(CLIENT_KEY).chat.completions.create(agentRequest(60) as never, {
        headers: { 'api-key': 'azure-SECRET-key', 'x-portkey-api-key': 'pk-SECRET-4444' },
      });
      expect(answer.choices[0].message.content).toBe('rescued answer');
    }
    expectNoCredentials(summarizer!.received);
    // The upstream itself still gets the client's key, on every call (the second request went
    // compacted ahead, from memory).
    expect(upstream!.received.length).toBeGreaterThanOrEqual(3);
    for (const r of upstream!.received) expect(r.headers.authorization).toBe(`Bearer ${CLIENT_KEY}`);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({ summarizer: summarizer!.origin });
    expect(gateway!.logText()).not.toMatch(/SECRET/);
  });

  it("gets no upstream.apiKey (the gateway's own key)", async () => {
    await start({ upstreamKey: UPSTREAM_KEY });
    const answer = await chatSdk('placeholder').chat.completions.create(agentRequest(60) as never);
    expect(answer.choices[0].message.content).toBe('rescued answer');
    expectNoCredentials(summarizer!.received);
    for (const r of upstream!.received) expect(r.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(warnings()).toHaveLength(1);
  });

  it("gets no x-api-key (Anthropic SDK), the gateway's or the client's", async () => {
    for (const upstreamKey of [undefined, UPSTREAM_KEY]) {
      await start({ upstreamKey });
      // Claude Code's way: the key as x-api-key (this SDK sends its apiKey as a Bearer token).
      const sdk = new Anthropic({
        baseURL: gateway!.origin,
        apiKey: CLIENT_KEY,
        defaultHeaders: { 'x-api-key': CLIENT_KEY },
        maxRetries: 0,
      });
      const answer = await sdk.messages.create({ model: 'claude-test', max_tokens: 500, messages: messagesConversation() });
      expect(answer.content[0]).toMatchObject({ type: 'text', text: 'rescued answer' });
      expect(summarizer!.received.map((r) => r.url)).toEqual(['/v1/messages']);
      expectNoCredentials(summarizer!.received);
      for (const r of upstream!.received) expect(r.headers['x-api-key']).toBe(upstreamKey ?? CLIENT_KEY);
      await gateway!.close();
      await upstream!.close();
      await summarizer!.close();
    }
    gateway = upstream = summarizer = undefined;
  });

  it('gets no x-goog-api-key (Gemini SDK), nor a key the client sent as ?key=', async () => {
    await start({ gemini: true });
    const ai = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gateway!.origin } });
    const answer = await ai.models.generateContent({ model: MODEL, contents: geminiContents() });
    expect(answer.text).toBe('rescued answer');
    // Another conversation (nothing remembered of it), its key in the query.
    const res = await fetch(`${gateway!.origin}/v1beta/models/${MODEL}:generateContent?key=${CLIENT_KEY}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ contents: geminiContents('lib') }),
    });
    expect(res.status).toBe(200);
    // (Compacted ahead: the window is known by now.)
    expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ strategy: 'summarize' });
    expect(summarizer!.received.map((r) => r.url)).toEqual(Array(2).fill(`/v1beta/models/${MODEL}:generateContent`));
    expectNoCredentials(summarizer!.received);
    expect(upstream!.received.some((r) => r.headers['x-goog-api-key'] === CLIENT_KEY)).toBe(true);
    expect(upstream!.received.some((r) => r.url.endsWith(`?key=${CLIENT_KEY}`))).toBe(true);
  });
});

describe('a summarizer with a key of its own, or on the upstream\u2019s origin', () => {
  it('summarizer.apiKey on another origin: that key, nothing of the client, no warning', async () => {
    await start({ summarizer: { apiKey: SUMMARIZER_KEY } });
    await chatSdk(CLIENT_KEY).chat.completions.create(agentRequest(60) as never);
    const [call] = summarizer!.received;
    expect(call.headers.authorization).toBe(`Bearer ${SUMMARIZER_KEY}`);
    expect(JSON.stringify(call.headers)).not.toContain(CLIENT_KEY);
    expect(warnings()).toHaveLength(0);
  });

  it("the upstream's origin on another path: the request's own credentials, as before", async () => {
    upstream = await startFakeUpstream(provider);
    gateway = await startGateway({
      upstream: { url: upstream.baseUrl },
      summarizer: { url: `${upstream.origin}/summarizer/v1`, model: 'small' },
      compaction: { mask: false },
    });
    await chatSdk(CLIENT_KEY).chat.completions.create(agentRequest(60) as never);
    const calls = upstream.received.filter(isSummarizer);
    expect(calls.length).toBeGreaterThan(0);
    for (const call of calls) {
      expect(call.url).toBe('/summarizer/v1/chat/completions');
      expect(call.headers.authorization).toBe(`Bearer ${CLIENT_KEY}`);
    }
    expect(warnings()).toHaveLength(0);
  });

  it("the upstream itself behind Portkey: its summarizer calls carry the client's x-portkey-* headers too", async () => {
    // Portkey refuses a call without its key; the summary must come from it, not the digest.
    upstream = await startFakeUpstream((req, res) => {
      if (req.headers['x-portkey-api-key'] !== 'pk-team-key')
        return json(res, 401, { error: { message: 'x-portkey-api-key missing', type: 'authentication_error' } });
      provider(req, res);
    });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, compaction: { mask: false } });
    const sdk = new OpenAI({
      baseURL: gateway.baseUrl,
      apiKey: CLIENT_KEY,
      maxRetries: 0,
      defaultHeaders: { 'x-portkey-api-key': 'pk-team-key', 'x-portkey-provider': 'openai' },
    });
    const { response } = await sdk.chat.completions.create(agentRequest(60) as never).withResponse();
    expect(parseCompactionHeader(response.headers.get('x-gateway-compaction'))).toMatchObject({
      outcome: 'replayed',
      strategy: 'summarize',
    });
    const calls = upstream.received.filter(isSummarizer);
    expect(calls.length).toBeGreaterThan(0);
    for (const call of calls)
      expect(call.headers).toMatchObject({
        'x-portkey-api-key': 'pk-team-key',
        'x-portkey-provider': 'openai',
        authorization: `Bearer ${CLIENT_KEY}`,
      });
  });
});
