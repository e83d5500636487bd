import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Received } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type Scripted, type StandIn, type TooLong } from '../helpers/provider.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { sessionBody, withReasoning } from '../helpers/sessions.js';
import { CONTEXT_WINDOW_MESSAGE, errorEventInStream, responseObject } from '../helpers/strict-responses.js';
import { expectValidResponsesReplay as expectValidReplay } from '../scenarios/apis/responses.js';

/*
 * Codex CLI's requests (the Responses API, a recorded session with encrypted reasoning) through the
 * gateway, with the official SDK as the client: the shapes of "too long" only the Responses API and
 * the gateways in front of it have (a JSON 413, a 200 Response whose status is failed, an `error`
 * event in a 200 stream) rescued with one compaction and one replay the strict stand-in accepts;
 * Codex's own compaction call, history held upstream, its headers. The 400 with a stated window,
 * the edge's 413 page and `response.failed` in a stream are the Responses row of the scenario table
 * (test/scenarios/rescue.test.ts).
 */

let standIn: StandIn;
let gateway: TestGateway;
/** Whether the refusal was a scripted answer (a shape the stand-in's rules do not write) rather than the rules'. */
let scripted: boolean;
afterEach(async () => {
  await gateway?.close();
  await standIn?.close();
});

/** Codex's 8th request of a real session (115 KB), with encrypted reasoning (issued by a stand-in) before each call. */
let codex: Record<string, any>;
beforeAll(async () => {
  codex = await withReasoning(sessionBody('codex', '08-main.json'));
});
const codexRequest = (stream: boolean) => ({ ...codex, stream });
const LIMIT = 100_000;

type Overflow = 'openai_400' | 'json_413' | 'failed_in_stream' | 'error_event_in_stream';

/**
 * How each overflow is said: by the stand-in's rules (its `tooLong`), or, where the shape is one
 * the rules do not write, by a scripted answer to the first call; the replay meets the rules.
 */
const OVERFLOWS: Record<Overflow, { reason: string; tooLong: TooLong; first?: (stream: boolean) => Scripted | undefined }> = {
  openai_400: { reason: 'context_length', tooLong: 'stated' },
  // A JSON 413 (an API gateway's), not the edge's HTML page the rules write.
  json_413: {
    reason: 'body_too_large',
    tooLong: 'page',
    first: () => ({
      status: 413,
      json: { error: { message: 'Request body too large.', type: 'invalid_request_error', code: 'request_too_large' } },
    }),
  },
  // Streaming, the rules' 200 stream ending in response.failed; not streaming, a 200 Response whose status is failed.
  failed_in_stream: {
    reason: 'context_length',
    tooLong: 'in_stream',
    first: (stream) =>
      stream
        ? undefined
        : {
            status: 200,
            json: { ...responseObject('', 'failed'), error: { code: 'context_length_exceeded', message: CONTEXT_WINDOW_MESSAGE } },
          },
  },
  // Streaming, a 200 stream with an `error` event; not streaming, the rules' 400.
  error_event_in_stream: {
    reason: 'context_length',
    tooLong: 'stated',
    first: (stream) => (stream ? { events: errorEventInStream() } : undefined),
  },
};

async function setup(style: Overflow, stream: boolean, config: Record<string, unknown> = {}) {
  standIn = await startStandIn({ limitBytes: LIMIT, tooLong: OVERFLOWS[style].tooLong, reply: () => ({ text: 'rescued answer' }) });
  const first = OVERFLOWS[style].first?.(stream);
  scripted = first !== undefined;
  if (first) standIn.script(first);
  gateway = await startGateway({ upstream: { url: standIn.baseUrl }, summarizer: { maxInputTokens: 500_000 }, ...config });
  return new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'sk-codex', maxRetries: 0 });
}

/** The table's Responses replay check, under this file's limit. */
const expectValidResponsesReplay = (rejected: Received, replay: Received) => expectValidReplay(rejected, replay, LIMIT);

/** The first call was over the window and refused, the replay accepted by the rules. */
function expectRefusedThenAccepted() {
  const [rejected] = standIn.calls('responses');
  expect(standIn.calls('responses')).toHaveLength(2);
  expect(rejected.body.length).toBeGreaterThan(LIMIT);
  expect(standIn.verdicts('responses')).toEqual(scripted ? [null] : [expect.any(String), null]);
}

/** Rescued by masking old tool outputs (the default here: enough for this request), or by a summary. */
function expectRescued(header: string | null, reason: string, strategy: 'mask' | 'summarize' = 'mask') {
  expect(parseCompactionHeader(header)).toMatchObject({ outcome: 'replayed', reason, strategy });
  const [rejected, replay] = standIn.calls('responses');
  expectRefusedThenAccepted();
  expectValidResponsesReplay(rejected, replay);
  if (strategy === 'mask') {
    // Every item where it was, the oldest outputs one line each; no model asked.
    expect(replay.json.input).toHaveLength(rejected.json.input.length);
    expect(replay.body.toString()).toContain('[tool output omitted by compaction-gateway: ');
    expect(replay.body.toString()).not.toContain('[compaction-gateway]');
    expect(standIn.summarizerCalls()).toEqual([]);
    return;
  }
  expect(standIn.summarizerCalls()).toHaveLength(1);
  // The summarizer spoke the request's own API, with the request's credentials.
  const summarizer = standIn.summarizerCalls()[0];
  expect(summarizer.url).toBe('/v1/responses');
  expect(summarizer.headers.authorization).toBe('Bearer sk-codex');
  // It never reads encrypted reasoning.
  const encrypted = rejected.json.input.filter((i: any) => i.type === 'reasoning').map((i: any) => i.encrypted_content);
  expect(encrypted.length).toBeGreaterThan(0);
  for (const sealed of encrypted) expect(summarizer.body.toString()).not.toContain(sealed);
  expect(summarizer.body.toString()).not.toContain('encrypted_content');
}

const REASON = Object.fromEntries(Object.entries(OVERFLOWS).map(([style, o]) => [style, o.reason])) as Record<Overflow, string>;
/** The shapes the scenario table has no row for (its Responses row refuses with the rules' 400, page and failed stream). */
const RESPONSES_ONLY: Overflow[] = ['json_413', 'failed_in_stream', 'error_event_in_stream'];

describe.each(RESPONSES_ONLY)('an overflow (%s)', (style) => {
  it('responses.create, not streaming: the answer, one compaction, one replay', async () => {
    const sdk = await setup(style, false);
    const { data, response } = await sdk.responses.create(codexRequest(false) as any).withResponse();
    expect((data as any).output_text).toBe('rescued answer');
    expectRescued(response.headers.get('x-gateway-compaction'), REASON[style]);
  });

  it('responses.create, not streaming, masking off: the answer, one summary, one replay', async () => {
    const sdk = await setup(style, false, { compaction: { mask: false } });
    const { data, response } = await sdk.responses.create(codexRequest(false) as any).withResponse();
    expect((data as any).output_text).toBe('rescued answer');
    expectRescued(response.headers.get('x-gateway-compaction'), REASON[style], 'summarize');
  });

  it('responses.create, streaming: every event of the replayed stream reaches the client', async () => {
    const sdk = await setup(style, true);
    const { data: stream, response } = await sdk.responses.create(codexRequest(true) as any).withResponse();
    const types: string[] = [];
    let text = '';
    for await (const event of stream as any) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
    }
    expect(text).toBe('rescued answer');
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(types).not.toContain('response.failed');
    expectRescued(response.headers.get('x-gateway-compaction'), REASON[style]);
  });

  it("responses.stream: the final response is the replay's", async () => {
    const sdk = await setup(style, true);
    const stream = sdk.responses.stream(codexRequest(true) as any);
    const final = await stream.finalResponse();
    expect(final.output_text).toBe('rescued answer');
    expectRefusedThenAccepted();
  });
});

it("Codex's own compaction call (/v1/responses/compact) is rescued the same way", async () => {
  await setup('openai_400', false);
  const res = await fetch(`${gateway.baseUrl}/responses/compact`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-codex' },
    body: JSON.stringify({ ...codexRequest(false), stream: undefined }),
  });
  expect(res.status).toBe(200);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed' });
  expect(standIn.calls('responses').map((c) => c.url)).toEqual(['/v1/responses/compact', '/v1/responses/compact']);
});

it('a request whose history is held upstream (previous_response_id) is replayed once with truncation "auto"', async () => {
  const sdk = await setup('openai_400', false);
  const body = {
    model: 'fake-model',
    previous_response_id: 'resp_earlier',
    input: [{ type: 'message', role: 'user', content: 'x'.repeat(LIMIT) }],
  };
  // The fake refuses by size, so the replay is refused too: what matters is what was sent.
  const err = await sdk.responses.create(body as any).catch((e) => e);
  expect(err.status).toBe(400);
  const [first, replay] = standIn.calls('responses');
  expect(standIn.calls('responses')).toHaveLength(2);
  expect(first.json.truncation).toBeUndefined();
  expect(replay.json).toEqual({ ...body, truncation: 'auto' });
  expect(parseCompactionHeader(err.headers.get('x-gateway-compaction'))).toMatchObject({
    outcome: 'replay_failed',
    strategy: 'truncation',
  });
  expect(standIn.summarizerCalls()).toHaveLength(0);
});

it('a request that already asked for truncation "auto" is passed through with its error', async () => {
  const sdk = await setup('openai_400', false);
  const body = { model: 'fake-model', previous_response_id: 'resp_earlier', truncation: 'auto', input: 'x'.repeat(LIMIT) };
  const err = await sdk.responses.create(body as any).catch((e) => e);
  expect(err.status).toBe(400);
  expect(standIn.calls('responses')).toHaveLength(1);
  expect(parseCompactionHeader(err.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'not_shrunk', why: 'no_messages' });
});

it('counts the rescue with api="responses"', async () => {
  const sdk = await setup('openai_400', false);
  await sdk.responses.create(codexRequest(false) as any);
  const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
  expect(metrics).toMatch(/gateway_overlong_rejections_total\{api="responses",reason="context_length",upstream="default"\} 1/);
  expect(metrics).toMatch(/gateway_replays_total\{api="responses",result="success",upstream="default"\} 1/);
  const warn = gateway.logLines().filter((l) => l.level === 40 && /overlong/.test(l.msg));
  expect(warn).toHaveLength(1);
  expect(warn[0].msg).toMatch(/upstream rejected the responses request as overlong \(400 context_length/);
});

it("with the smallest tail (keepRecent 1), the newest output still keeps its call and that call's reasoning", async () => {
  const sdk = await setup('openai_400', false, { compaction: { keepRecent: 1 } });
  const { response } = await sdk.responses.create(codexRequest(false) as any).withResponse();
  expect(parseCompactionHeader(response.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed' });
  const [rejected, replay] = standIn.calls('responses');
  expectValidResponsesReplay(rejected, replay);
  const tail = replay.json.input.slice(-3);
  expect(tail.map((i: any) => i.type)).toEqual(['reasoning', 'function_call', 'function_call_output']);
  expect(tail[1].call_id).toBe(tail[2].call_id);
  expect(tail[0]).toEqual(rejected.json.input.at(-3));
});

it("Codex's own headers reach the upstream as sent, on the first attempt and the replay; its stream is asked for uncompressed", async () => {
  await setup('openai_400', true);
  const recorded = JSON.parse(readFileSync(new URL('../fixtures/agent-sessions/codex/headers.json', import.meta.url), 'utf8')).headers;
  const { host: _h, 'content-length': _l, ...sent } = recorded;
  const res = await fetch(`${gateway.baseUrl}/responses`, {
    method: 'POST',
    headers: { ...sent, authorization: 'Bearer sk-codex' },
    body: JSON.stringify(codexRequest(true)),
  });
  await res.text();
  expect(res.status).toBe(200);
  expect(standIn.calls('responses')).toHaveLength(2);
  for (const call of standIn.calls('responses')) {
    for (const name of [
      'x-codex-beta-features',
      'x-codex-window-id',
      'x-codex-turn-metadata',
      'x-client-request-id',
      'session-id',
      'thread-id',
      'originator',
      'user-agent',
      'accept',
    ]) {
      expect(call.headers[name], name).toBe(sent[name]);
    }
    expect(call.headers['accept-encoding']).toBe('identity');
  }
});

it('summarizer.api picks another API for the summarizer: a Responses rescue summarised through chat completions', async () => {
  const sdk = await setup('openai_400', false, {
    summarizer: { maxInputTokens: 500_000, api: 'chat', model: 'summary-model' },
    compaction: { mask: false },
  });
  const { response } = await sdk.responses.create(codexRequest(false) as any).withResponse();
  expect(parseCompactionHeader(response.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed', strategy: 'summarize' });
  const [call] = standIn.summarizerCalls();
  expect(call.url).toBe('/v1/chat/completions');
  expect(call.json.model).toBe('summary-model');
  expect(call.json.messages.map((m: any) => m.role)).toEqual(['system', 'user']);
  const replay = standIn.calls('responses')[1];
  const summary = replay.json.input.find((i: any) => JSON.stringify(i).includes('[compaction-gateway]'));
  // The summary in the replay is the one the summarizer answered.
  const said: string = JSON.parse(standIn.answerBytes(call).toString()).choices[0].message.content;
  expect(said).toMatch(/^SUMMARY of \d+ chars: /);
  expect(summary.content[0].text).toContain(said);
});
