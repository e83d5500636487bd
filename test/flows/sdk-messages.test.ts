import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { countBreakpoints, expectValidMessagesReplay, summaryTurn } from '../helpers/anthropic.js';
import { claudeRequest, type ClaudeRequestOptions } from '../helpers/claude-request.js';
import type { Received } from '../helpers/fake-upstream.js';
import { tokensOf, type BindingCheck, type StrictAnthropic, type StrictAnthropicReject } from '../helpers/strict-anthropic.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * The official Anthropic SDK, pointed at the gateway as Claude Code is (base URL without /v1),
 * against the strict Anthropic stand-in (the API's checks and errors, thinking signed and bound to
 * what came before it), refusing the request for its size or its window.
 * Every row: one rejected attempt, one replay, the client sees only the replay's answer.
 */

const API_KEY = 'sk-ant-test-placeholder';
let upstream: StrictAnthropic;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

const WINDOW_BYTES = 80_000; // input_plus_max_tokens: a 20,000-token window, which the prompt alone fits
/** The stand-in's refusals for size or window; any other refusal is about the request's content. */
const TOO_LONG = /prompt is too long|Too Large|exceeds the maximum allowed number of bytes|exceed context limit/;

/**
 * claudeRequest(o) with every assistant turn's thinking as the stand-in issued it: each turn's
 * history is sent in order to a stand-in with no limit, and the block it answered with replaces the
 * made-up one (a redacted one too: the stand-in issues thinking blocks only, their text omitted).
 * The signatures hold for any stand-in of this process, as the API's do for any later request.
 */
async function signedRequest(o: ClaudeRequestOptions = {}): Promise<Record<string, any>> {
  const body = claudeRequest(o);
  const signer = await startStandIn({ provider: 'anthropic' });
  try {
    const api = new Anthropic({ baseURL: signer.origin, apiKey: API_KEY, maxRetries: 0 });
    const messages: any[] = body.messages;
    for (const [i, m] of messages.entries()) {
      if (m.role !== 'assistant') continue;
      // (a refusal would throw: the history so far, its blocks signed, is valid as sent)
      await api.messages.create({ ...body, messages: messages.slice(0, i) } as any);
      messages[i] = { ...m, content: [signer.issued().at(-1)!.block, ...m.content.slice(1)] };
    }
    return body;
  } finally {
    await signer.close();
  }
}

async function setup(style: StrictAnthropicReject, limitBytes: number) {
  upstream = await startStandIn({ provider: 'anthropic', style, limitBytes, reply: () => ({ text: 'rescued answer' }) });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
}

const sdk = () => new Anthropic({ baseURL: gateway.origin, apiKey: API_KEY, maxRetries: 0 });

async function send(mode: 'create' | 'stream', params: Record<string, any>) {
  if (mode === 'create') {
    const { data, response } = await sdk()
      .messages.create(params as any)
      .withResponse();
    return { message: data, response };
  }
  const { data: stream, response } = await sdk()
    .messages.stream(params as any)
    .withResponse();
  const events: string[] = [];
  stream.on('streamEvent', (e) => events.push(e.type));
  const message = await stream.finalMessage();
  expect(events).toContain('content_block_delta');
  return { message: message as Anthropic.Message, response };
}

async function replaysMetric(): Promise<string> {
  const text = await (await fetch(`${gateway.origin}/metrics`)).text();
  // Every series starts at 0: only those that counted something.
  return text
    .split('\n')
    .filter((l) => l.startsWith('gateway_replays_total{api="messages"') && !l.endsWith(' 0'))
    .join('\n');
}

async function expectOneReplay(response: Response, message: Anthropic.Message) {
  const calls = upstream.messageCalls();
  expect(calls).toHaveLength(2);
  expect(calls.map((c) => c.url)).toEqual(['/v1/messages', '/v1/messages']);
  const header = parseCompactionHeader(response.headers.get('x-gateway-compaction'));
  expect(header.outcome).toBe('replayed');
  // The attempt refused for its size alone; the replay taken as it was, its signed thinking with it.
  expect(upstream.checks()).toHaveLength(2);
  const [attempt, answered] = upstream.checks();
  expect(attempt.refused).toMatch(TOO_LONG);
  expect(answered.refused).toBeNull();
  // The answer as the stand-in gave it: the thinking it signed for the replay, then its text.
  expect(upstream.issued()).toEqual([{ call: 1, block: message.content[0] }]);
  expect(message.content.slice(1)).toEqual([{ type: 'text', text: 'rescued answer' }]);
  // The replay's usage as the upstream reported it: the gateway leaves the answer untouched.
  expect(message.usage.input_tokens).toBe(tokensOf(calls[1].body.length));
  expect(await replaysMetric()).toBe('gateway_replays_total{api="messages",result="success",upstream="default"} 1');
  const warnings = gateway.logLines().filter((l) => l.level === 40 && /^upstream rejected the messages request as overlong/.test(l.msg));
  expect(warnings).toHaveLength(1);
  expect(warnings[0].compaction).toMatchObject({ api: 'messages', outcome: 'replayed' });
  return { header, rejected: calls[0], replay: calls[1], answered };
}

/**
 * After a compaction the one stale block the stand-in saw is the open round's, which the gateway
 * kept whole under drop_block (thinking is enabled): the stand-in dropped it alone, and said so.
 * Every older block stale under the new prefix was stripped before it went out.
 */
function expectOpenRoundDropped(answered: BindingCheck, replay: Received, header: Record<string, unknown>): void {
  const open = `messages.${replay.json.messages.length - 2}.content.0`;
  expect(answered).toEqual({ refused: null, invalid: [open], dropped: [open], dropBlock: true });
  expect(header['reasoning-dropped']).toBe(1);
}

/*
 * The Messages API's 400, the edge's 413 page and the error event in a stream are each a row of the
 * scenario table (test/scenarios/rescue.test.ts); here, the same rescue of a conversation whose
 * thinking is signed and bound to its prefix, summarised and masked, and the API's own JSON 413.
 * The 413 rows state no limit: the aim is half the body, and masking the oldest tool results gets
 * there. The stated windows of the others are under what masking every older result leaves: the
 * conversation is summarised, by the upstream in the Messages API.
 */
const compacted: Array<[StrictAnthropicReject, 'create' | 'stream', number, 'mask' | 'summarize']> = [
  ['prompt_too_long', 'stream', 0.5, 'summarize'],
  ['json_413', 'create', 0.7, 'mask'],
  ['json_413', 'stream', 0.7, 'mask'],
];

describe('the Anthropic SDK through the gateway: overflows rescued by compaction', () => {
  it.each(compacted)('%s, messages.%s', async (style, mode, share, strategy) => {
    const request = await signedRequest();
    const limitBytes = Math.floor(JSON.stringify(request).length * share);
    await setup(style, limitBytes);
    const { message, response } = await send(mode, request);
    const { header, rejected, replay, answered } = await expectOneReplay(response, message);
    expect(header.reason).toBe(style.endsWith('413') ? 'body_too_large' : 'context_length');
    expect(header.strategy).toBe(strategy);
    expect(replay.body.length).toBeLessThanOrEqual(limitBytes);
    expectValidMessagesReplay(rejected, replay);
    expectOpenRoundDropped(answered, replay, header);
    expect(replay.json.stream).toBe(mode === 'stream' ? true : undefined);
    if (strategy === 'mask') {
      // Every message where it was, the oldest tool results one line each; no model asked.
      expect(replay.json.messages).toHaveLength(rejected.json.messages.length);
      expect(summaryTurn(replay.json)).toBeUndefined();
      expect(JSON.stringify(replay.json.messages)).toContain('[tool output omitted by compaction-gateway: ');
      expect(replay.json.messages.at(-1)).toEqual(rejected.json.messages.at(-1));
      expect(upstream.summarizerCalls()).toEqual([]);
      return;
    }
    // The summary is a user turn (here merged into the task's turn, before the system entry).
    expect(summaryTurn(replay.json).role).toBe('user');
    expect(replay.json.messages[0].content[0]).toEqual(rejected.json.messages[0].content[0]);
    expect(replay.json.messages[1]).toEqual(rejected.json.messages[1]);
    expect(JSON.stringify(replay.json.messages)).toContain('Now also check the tests, please.');
    expect(countBreakpoints(rejected.json)).toBe(4);
    // The summarizer spoke the Messages API with the request's own key and version.
    const [summarizer] = upstream.summarizerCalls();
    expect(summarizer.url).toBe('/v1/messages');
    // (this SDK sends its key as a Bearer token; Claude Code as x-api-key: whichever came, it is reused)
    expect(JSON.stringify([rejected.headers.authorization, rejected.headers['x-api-key']])).toContain(API_KEY);
    expect(summarizer.headers.authorization).toBe(rejected.headers.authorization);
    expect(summarizer.headers['x-api-key']).toBe(rejected.headers['x-api-key']);
    expect(summarizer.headers['anthropic-version']).toBe(rejected.headers['anthropic-version']);
    expect(Object.keys(summarizer.json)).toEqual(['model', 'system', 'messages', 'max_tokens']);
    expect(summarizer.json.messages).toHaveLength(1);
    expect(summarizer.json.messages[0].role).toBe('user');
  });
});

describe('the Anthropic SDK through the gateway: prompt plus max_tokens over the window', () => {
  it.each(['create', 'stream'] as const)('messages.%s: max_tokens lowered, messages untouched', async (mode) => {
    const request = await signedRequest();
    await setup('input_plus_max_tokens', WINDOW_BYTES);
    expect(tokensOf(JSON.stringify(request).length)).toBeLessThan(WINDOW_BYTES / 4);
    const { message, response } = await send(mode, request);
    const { header, rejected, replay, answered } = await expectOneReplay(response, message);
    expect(header.strategy).toBe('clamp');
    expect(header['completion-before']).toBe(16_000);
    const lowered = header['completion-after'] as number;
    expect(lowered).toBeLessThan(16_000);
    expect(lowered).toBeGreaterThan(4_000);
    expect(replay.json).toEqual({ ...rejected.json, max_tokens: lowered });
    expect(Object.keys(replay.json)).toEqual(Object.keys(rejected.json));
    // The messages untouched, every thinking block in them still bound to its prefix: none dropped.
    expect(answered).toEqual({ refused: null, invalid: [], dropped: [], dropBlock: false });
    expect(upstream.summarizerCalls()).toHaveLength(0);
  });

  it('a thinking budget at or above the lowered max_tokens forbids the clamp: compacted instead', async () => {
    const request = await signedRequest({ thinkingBudget: 12_000 });
    await setup('input_plus_max_tokens', WINDOW_BYTES);
    const { message, response } = await send('create', request);
    const { header, rejected, replay, answered } = await expectOneReplay(response, message);
    expect(header.strategy).toBe('summarize');
    expect(replay.json.max_tokens).toBe(16_000);
    expect(tokensOf(replay.body.length) + 16_000).toBeLessThanOrEqual(WINDOW_BYTES / 4);
    expectValidMessagesReplay(rejected, replay);
    expectOpenRoundDropped(answered, replay, header);
  });
});

describe('the last resort keeps the open round signed thinking whole', () => {
  const options: ClaudeRequestOptions = { lastResultBytes: 40_000, lastAssistantChars: 3_000 };

  it('the newest tool result is cut to fit; the assistant turn with thinking beside it is byte-identical, under drop_block', async () => {
    const request = await signedRequest(options);
    await setup('prompt_too_long', 24_000);
    const { message, response } = await send('stream', request);
    const { header, rejected, replay, answered } = await expectOneReplay(response, message);
    expect(header.cut).toBeGreaterThan(0);
    // Thinking is enabled: the open round's block must lead its message, so it stays, covered.
    expect(header['block-binding']).toBe('drop_block');
    expectValidMessagesReplay(rejected, replay);
    expectOpenRoundDropped(answered, replay, header);
    const original = rejected.json.messages as any[];
    const sent = replay.json.messages as any[];
    expect(sent.at(-2)).toEqual(original.at(-2));
    expect(replay.body.includes(Buffer.from(JSON.stringify(original.at(-2))))).toBe(true);
    expect(sent.at(-1).content[0].content.length).toBeLessThan(original.at(-1).content[0].content.length);
    expect(sent.at(-1).content[0].content).toContain('characters cut by compaction-gateway');
  });
});
