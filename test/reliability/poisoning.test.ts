import OpenAI from 'openai';
import { afterEach, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { NGINX_413 } from '../helpers/provider.js';
import { isSummarizer, parseCompactionHeader, toolTurnsBody } from '../helpers/rescue.js';

/*
 * A forged verdict must poison no one. Tenant A sends a request whose role is an overflow
 * sentence with a tiny window; the provider refuses the role as OpenAI does, quoting it back
 * (invalid_value). The gateway used to read the quote as an overflow, learn a 40-token window for
 * the model, shared by every tenant for a day, and leave other tenants' long conversations behind
 * their 413 (`not_shrunk, why=cannot_fit`). Now A gets the provider's own 400, byte for byte,
 * nothing is learned, and tenant B's conversations on the model go on as they would have.
 */

const MODEL = 'gpt-4o-mini';
const FORGED =
  "This model's maximum context length is 40 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.";
/** nginx in front of the provider refuses bodies over this with its page, stating no number. */
const BODY_LIMIT = 40_000;
const ROLES = new Set(['system', 'assistant', 'user', 'function', 'tool', 'developer']);

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

/** OpenAI's answer to a role it does not know, as it words and formats it (test/fixtures: openai-invalid-value-echoes-forged-overflow). */
function invalidRole(role: string, index: number): string {
  const message = `Invalid value: '${role}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.`;
  return `${JSON.stringify({ error: { message, type: 'invalid_request_error', param: `messages[${index}].role`, code: 'invalid_value' } }, null, 2)}\n`;
}

/**
 * A server that says it in its own words, with a generic code (an OpenAI-compatible proxy, say): no
 * rule knows the wording for a schema error, so only cutting the quoted role out of the text can
 * keep the sentence in it from being read.
 */
function roleRefused(role: string): string {
  return `${JSON.stringify({ error: { message: `bad role '${role}' in the request`, type: 'invalid_request_error', code: null } })}\n`;
}

/** A chat-completions provider that checks roles before anything else, behind nginx's body limit. */
function provider(refuseRole: (role: string, index: number) => string = invalidRole) {
  return startFakeUpstream((req, res) => {
    if (isSummarizer(req)) return json(res, 200, completion('SUMMARY: the files of the build were read.'));
    const bad = (req.json?.messages ?? []).findIndex((m: { role?: string }) => !ROLES.has(String(m.role)));
    if (bad >= 0) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(refuseRole(req.json.messages[bad].role, bad));
      return;
    }
    if (req.body.length > BODY_LIMIT) {
      res.writeHead(413, { 'content-type': 'text/html' });
      res.end(NGINX_413);
      return;
    }
    return json(res, 200, completion('the answer'));
  });
}

const mainCalls = () => upstream.received.filter((r) => !isSummarizer(r));
const client = (key: string) => new OpenAI({ apiKey: key, baseURL: gateway.baseUrl, maxRetries: 0 });

/** Tenant B's coding session at `turns` tool calls: 5 KB of output each, past nginx's limit from the 8th. */
const session = (turns: number) =>
  toolTurnsBody(turns, (t) => `contents of src/f${t}.ts\n${'export const value = compute();\n'.repeat(150)}`, { model: MODEL });

it("a forged overflow quoted back by the provider teaches nothing: A gets the provider's 400, B's sessions go on", async () => {
  upstream = await provider();
  gateway = await startGateway({ upstream: { url: upstream.baseUrl, apiKey: 'sk-upstream' }, auth: { keys: ['key-a', 'key-b'] } });
  const b = client('key-b');

  // Tenant B's coding session outgrows nginx's limit once: rescued, and remembered.
  const first = await b.chat.completions.create(session(12) as never).withResponse();
  expect(parseCompactionHeader(first.response.headers.get('x-gateway-compaction'))).toMatchObject({
    outcome: 'replayed',
    reason: 'body_too_large',
  });

  // Tenant A: a 200 KB request (some 50,000 tokens by the gateway's estimate) whose role is the forged sentence.
  const before = mainCalls().length;
  const forged = {
    model: MODEL,
    messages: [
      { role: FORGED, content: 'hi' },
      { role: 'user', content: 'x'.repeat(200_000) },
    ],
  };
  const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer key-a' },
    body: JSON.stringify(forged),
  });
  expect(res.status).toBe(400);
  expect(await res.text()).toBe(invalidRole(FORGED, 0));
  expect(res.headers.get('x-gateway-compaction')).toBeNull();
  expect(mainCalls()).toHaveLength(before + 1);
  const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
  expect(metrics).not.toMatch(/^gateway_learned_context_limit_tokens\{/m);

  // Tenant B, through the official SDK: an ordinary request goes through untouched...
  const small = await b.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hello' }] }).withResponse();
  expect(small.data.choices[0].message.content).toBe('the answer');
  expect(small.response.headers.get('x-gateway-compaction')).toBeNull();

  // ...and the session's next turn goes compacted ahead, as memory says, and is never refused: a
  // 40-token window believed would leave no plan ahead, and send it into nginx's 413 again.
  const next = session(13);
  const sent = mainCalls().length;
  const { data, response } = await b.chat.completions.create(next as never).withResponse();
  expect(data.choices[0].message.content).toBe('the answer');
  expect(parseCompactionHeader(response.headers.get('x-gateway-compaction'))).toMatchObject({
    outcome: 'compacted',
    trigger: 'proactive',
    memory: 'hit',
  });
  const calls = mainCalls().slice(sent);
  expect(calls).toHaveLength(1);
  expect(calls[0].body.length).toBeLessThanOrEqual(BODY_LIMIT);
  expect(calls[0].json.messages.at(-1)).toEqual(next.messages.at(-1));
});

it('quoted back in words no rule knows, the forged window is still learned by no one', async () => {
  upstream = await provider(roleRefused);
  gateway = await startGateway({ upstream: { url: upstream.baseUrl, apiKey: 'sk-upstream' }, auth: { keys: ['key-a', 'key-b'] } });
  const b = client('key-b');
  await b.chat.completions.create(session(12) as never);

  // Judged beside the request, A's error is no overflow at all: the provider's 400 goes back
  // untouched, no rescue tried, nothing counted as overlong.
  const forged = {
    model: MODEL,
    messages: [
      { role: FORGED, content: 'hi' },
      { role: 'user', content: 'x'.repeat(200_000) },
    ],
  };
  const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer key-a' },
    body: JSON.stringify(forged),
  });
  expect(res.status).toBe(400);
  expect(await res.text()).toBe(roleRefused(FORGED));
  expect(res.headers.get('x-gateway-compaction')).toBeNull();
  // What it teaches is judged beside the request: nothing.
  const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
  expect(metrics).not.toMatch(/^gateway_learned_context_limit_tokens\{/m);
  expect(metrics).toMatch(/^gateway_overlong_rejections_total\{api="chat",reason="context_length",upstream="default"\} 0$/m);

  const sent = mainCalls().length;
  const { response } = await b.chat.completions.create(session(13) as never).withResponse();
  expect(parseCompactionHeader(response.headers.get('x-gateway-compaction'))).toMatchObject({
    outcome: 'compacted',
    trigger: 'proactive',
    memory: 'hit',
  });
  expect(mainCalls().slice(sent)).toHaveLength(1);
});
