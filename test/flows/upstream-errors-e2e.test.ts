import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { fixtures, sentContentType, type ErrorFixture } from '../helpers/fixtures.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest, expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';

// Every real error body, served by a fake upstream to the real route: the overlong ones are
// rescued with exactly one replay; every other one reaches the client byte-identical after
// exactly one upstream call.
let upstream: FakeUpstream;
let gateway: TestGateway;
let current: ErrorFixture;

beforeAll(async () => {
  upstream = await startFakeUpstream((req, res) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer') return json(res, 200, completion('condensed history'));
    const isReplay = req.headers['x-gateway-compaction'] !== undefined;
    if (isReplay) return json(res, 200, completion('rescued'));
    res.writeHead(current.status, { 'content-type': sentContentType(current), 'x-fixture': current.id });
    res.end(current.body);
  });
  gateway = await startGateway({
    upstream: { url: upstream.baseUrl },
    summarizer: { maxInputTokens: 500_000 },
    // Every fixture is its own rescue, from its own provider: what one fixture's error taught
    // (a remembered summary, a stated limit) says nothing about the next one's.
    memory: { enabled: false },
  });
});
afterAll(async () => {
  await gateway.close();
  await upstream.close();
});
beforeEach(() => {
  upstream.received.length = 0;
});

const chatCalls = () => upstream.received.filter((r) => r.headers['x-gateway-compaction'] !== 'summarizer');
const summarizerCalls = () => upstream.received.filter((r) => r.headers['x-gateway-compaction'] === 'summarizer');
const served = fixtures.filter((f) => f.status !== 200 || f.in_stream || f.overlong);

describe('not overlong: passed through untouched', () => {
  it.each(served.filter((f) => !f.overlong).map((f) => [f.id, f] as const))('%s', async (_id, fixture) => {
    current = fixture;
    const res = await postChat(gateway, agentRequest(60, fixture.in_stream ? { stream: true } : {}));
    expect(chatCalls()).toHaveLength(1);
    expect(summarizerCalls()).toHaveLength(0);
    expect(res.status).toBe(fixture.status);
    expect(res.text).toBe(fixture.body);
    expect(res.headers.get('x-fixture')).toBe(fixture.id);
    expect(res.headers.get('x-gateway-compaction')).toBeNull();
  });
});

/**
 * Overlong, but the window these errors state (2,048 and 256 tokens) cannot hold even the kept
 * system prompt and recent messages of the test's agent request: no replay, and the client gets
 * the refusal in its API's own words (these providers' are not OpenAI's), its numbers kept.
 */
const TOO_SMALL_TO_HELP = new Set(['cohere-too-many-tokens', 'llamacpp-500-exceed-context-size']);
/** A binary AWS event-stream frame: not an OpenAI-compatible SSE stream, so not read as one. */
const NOT_OPENAI_STREAM = new Set(['bedrock-stream-validation-exception']);

describe('overlong, but no compaction can fit the stated window', () => {
  it.each([...TOO_SMALL_TO_HELP].map((id) => [id, fixtures.find((f) => f.id === id)!] as const))('%s', async (_id, fixture) => {
    current = fixture;
    const res = await postChat(gateway, agentRequest(60));
    expect(chatCalls()).toHaveLength(1);
    expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({
      outcome: 'not_shrunk',
      why: 'cannot_fit',
      'overflow-error': 'translated',
    });
    expect(res.status).toBe(400);
    const error = (JSON.parse(res.text) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe('context_length_exceeded');
    // The window the provider stated, in OpenAI's sentence.
    const stated = fixture.body.match(/\b(2048|256)\b/)![1];
    expect(error.message).toMatch(
      new RegExp(`^This model's maximum context length is ${stated} tokens\\. However, your messages resulted in \\d+ tokens\\.`),
    );
  });
});

describe('overlong: compacted and replayed once', () => {
  const rescuable = served.filter((f) => f.overlong && !TOO_SMALL_TO_HELP.has(f.id) && !NOT_OPENAI_STREAM.has(f.id));
  it.each(rescuable.map((f) => [f.id, f] as const))('%s', async (_id, fixture) => {
    current = fixture;
    const res = await postChat(gateway, agentRequest(60, fixture.in_stream ? { stream: true } : {}));
    const calls = chatCalls();
    expect(calls).toHaveLength(2);
    expectValidReplay(calls[0], calls[1]);
    expect(res.status).toBe(200);
    expect(res.json.choices[0].message.content).toBe('rescued');
    const header = parseCompactionHeader(res.headers.get('x-gateway-compaction'));
    expect(header.outcome).toBe('replayed');
    expect(header.reason).toBe(fixture.status === 413 ? 'body_too_large' : 'context_length');
  });
});
