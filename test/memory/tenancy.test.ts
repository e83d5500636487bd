import { afterEach, describe, expect, it } from 'vitest';
import type { ConfigInput } from '../../src/config/schema.js';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { NGINX_413 } from '../helpers/provider.js';
import { isSummarizer, parseCompactionHeader, toolTurnsBody } from '../helpers/rescue.js';

/*
 * Whose memory is whose. A tenant is every credential a request carries (hashed); a request with
 * none has no memory unless memory.shareAnonymous says so (a single-user sidecar). What one
 * tenant's rejections taught is its own; a conversation's summary is kept per model; a lesson an
 * accepted request disproves is dropped.
 *
 * The stand-in is a provider behind nginx (bodies over 40 KB get nginx's 413 page, which states
 * no number) with context caps per key and model where the test sets them (a proxy with per-key
 * limits, or a smaller model): a request over its cap, at 4 bytes a token, is refused with
 * OpenAI's words and numbers.
 */

const BODY_LIMIT = 40_000;

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

/** Context caps in tokens, by `${key} ${model}` or by model; changed by the tests as they go. */
let caps: Record<string, number> = {};

function provider() {
  return startFakeUpstream((req, res) => {
    if (isSummarizer(req)) return json(res, 200, completion('SUMMARY: the files of the build were read.'));
    if (req.body.length > BODY_LIMIT) {
      res.writeHead(413, { 'content-type': 'text/html' });
      res.end(NGINX_413);
      return;
    }
    const key = String(req.headers.authorization ?? '').replace(/^Bearer /, '');
    const cap = caps[`${key} ${req.json?.model}`] ?? caps[String(req.json?.model)];
    const tokens = Math.ceil(req.body.length / 4);
    if (cap !== undefined && tokens > cap) {
      const message = `This model's maximum context length is ${cap} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`;
      return json(res, 400, { error: { message, type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } });
    }
    return json(res, 200, completion('the answer'));
  });
}

async function start(config: ConfigInput = {}) {
  caps = {};
  upstream = await provider();
  gateway = await startGateway({ upstream: { url: upstream.baseUrl }, ...config });
}

/** A coding session at `turns` tool calls of 2.2 KB each: past nginx's limit from the 19th. */
const session = (turns: number, extra: Record<string, unknown> = {}) =>
  toolTurnsBody(turns, (t) => `contents of src/f${t}.ts\n${'export const value = compute();\n'.repeat(60)}`, { model: 'm', ...extra });

/** 12 KB of one person's question and answer, nothing a compaction can take away: refused by a 2,000-token cap, passed through. */
const TEACHING = {
  model: 'm',
  messages: [
    { role: 'user', content: 'y'.repeat(6_000) },
    { role: 'assistant', content: 'ok' },
    { role: 'user', content: `${'z'.repeat(6_000)} and?` },
  ],
};

const mainCalls = () => upstream.received.filter((r) => !isSummarizer(r));

/** Sends one request and tells what the upstream saw of it and what the client got. */
async function send(body: unknown, headers: Record<string, string>) {
  const before = mainCalls().length;
  const res = await postChat(gateway, body, headers);
  expect(res.status).toBe(200);
  const value = res.headers.get('x-gateway-compaction');
  return { header: value ? parseCompactionHeader(value) : null, calls: mainCalls().slice(before) };
}

const key = (k: string) => ({ authorization: `Bearer ${k}` });

describe('what a tenant learned is its own', () => {
  it("a window one key was told does not tighten another key's compaction ahead", async () => {
    await start();
    // B's session outgrows nginx once: rescued and remembered, aimed at half of what was refused.
    expect((await send(session(22), key('sk-b'))).header).toMatchObject({ outcome: 'replayed', reason: 'body_too_large' });

    // A's key is capped at 2,000 tokens (8 KB): its 12 KB request teaches A that window.
    caps['sk-a m'] = 2_000;
    expect((await postChat(gateway, TEACHING, key('sk-a'))).status).toBe(400);

    // B's next turn goes ahead with B's own remembered aim: no 2,000-token window squeezes it.
    const b = await send(session(23), key('sk-b'));
    expect(b.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive', memory: 'hit' });
    expect(b.calls).toHaveLength(1);
    expect(b.calls[0].body.length).toBeGreaterThan(2_000 * 4);
    expect(b.calls[0].body.length).toBeLessThanOrEqual(BODY_LIMIT);
  });

  it('a window disproved by an accepted request is dropped, and no longer squeezes a rescue', async () => {
    const SQUEEZED = Math.floor(1_500 * 3 * 0.9);
    await start();
    // For a while A's key is capped at 1,500 tokens: a 12 KB request teaches it.
    caps['sk-a m'] = 1_500;
    expect((await postChat(gateway, TEACHING, key('sk-a'))).status).toBe(400);
    // Believed: a session behind nginx's 413 (which states nothing) is squeezed under 1,500 tokens (4,050 bytes at 3 a token).
    const squeezed = await send(session(22), key('sk-a'));
    expect(squeezed.header).toMatchObject({ outcome: 'replayed', reason: 'body_too_large' });
    expect(squeezed.calls[1].body.length).toBeLessThanOrEqual(SQUEEZED);

    // The cap is lifted: a 20 KB request (more than 8 bytes for each token of that window) is accepted.
    delete caps['sk-a m'];
    const accepted = await send({ model: 'm', messages: [{ role: 'user', content: `${'w'.repeat(20_000)} and?` }] }, key('sk-a'));
    expect(accepted.header).toBeNull();
    await expect.poll(() => gateway.logLines().some((l) => /disproved a limit learned for its model; dropped$/.test(l.msg))).toBe(true);

    // Another session behind the 413 is rescued as its own refusal allows, the window no longer believed.
    const other = session(22);
    (other.messages[1] as { content: string }).content = 'Write the docs.';
    const freed = await send(other, key('sk-a'));
    expect(freed.header).toMatchObject({ outcome: 'replayed', reason: 'body_too_large' });
    expect(freed.calls[1].body.length).toBeGreaterThan(SQUEEZED);
    expect(freed.calls[1].body.length).toBeLessThanOrEqual(BODY_LIMIT);
  });
});

describe('a summary is kept per model', () => {
  it('a conversation compacted for a small model goes to a larger one as it was sent', async () => {
    await start();
    caps['m-small'] = 7_000;
    // At 14 tool calls the conversation is some 7,800 tokens: over the small model's window.
    expect((await send(session(14, { model: 'm-small' }), key('sk-b'))).header).toMatchObject({
      outcome: 'replayed',
      reason: 'context_length',
    });
    // The same conversation, one turn on, to a model whose window it fits: untouched, no summary ahead.
    const larger = session(15, { model: 'm-large' });
    const res = await send(larger, key('sk-b'));
    expect(res.header).toBeNull();
    expect(res.calls).toHaveLength(1);
    expect(res.calls[0].body.toString()).toBe(JSON.stringify(larger));
    // Its own next turn on the small model still reuses what was remembered for it.
    expect((await send(session(15, { model: 'm-small' }), key('sk-b'))).header).toMatchObject({ trigger: 'proactive', memory: 'hit' });
  });
});

describe('a request with no credential has no memory, unless anonymous requests may share one', () => {
  // The gateway holds the upstream key; its clients send nothing.
  const holding = (shareAnonymous: boolean): ConfigInput => ({
    upstream: { url: 'replaced', apiKey: 'sk-upstream' },
    memory: { shareAnonymous },
  });

  it('by default, two clients that send nothing share nothing, and neither has memory', async () => {
    await start();
    await gateway.close();
    gateway = await startGateway({ ...holding(false), upstream: { url: upstream.baseUrl, apiKey: 'sk-upstream' } });
    expect((await send(session(22), {})).header).toMatchObject({ outcome: 'replayed', memory: 'miss' });
    // The next turn of that conversation, from anyone who sends nothing: rescued from scratch, no summary from before.
    const next = await send(session(23), {});
    expect(next.header).toMatchObject({ outcome: 'replayed', trigger: 'rejected', memory: 'miss' });
    expect(next.calls.map((c) => c.body.length > BODY_LIMIT)).toEqual([true, false]);
  });

  it('with memory.shareAnonymous (a single-user sidecar), they share one memory', async () => {
    await start();
    await gateway.close();
    gateway = await startGateway({ ...holding(true), upstream: { url: upstream.baseUrl, apiKey: 'sk-upstream' } });
    expect((await send(session(22), {})).header).toMatchObject({ outcome: 'replayed' });
    const next = await send(session(23), {});
    expect(next.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive', memory: 'hit' });
    expect(next.calls).toHaveLength(1);
  });

  it('a cookie is a credential: another cookie is another tenant', async () => {
    await start();
    expect((await send(session(22), { cookie: 'session=alice' })).header).toMatchObject({ outcome: 'replayed' });
    expect((await send(session(23), { cookie: 'session=alice' })).header).toMatchObject({ trigger: 'proactive', memory: 'hit' });
    expect((await send(session(23), { cookie: 'session=bob' })).header).toMatchObject({ trigger: 'rejected', memory: 'miss' });
  });
});
