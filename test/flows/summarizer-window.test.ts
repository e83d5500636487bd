import { afterEach, describe, expect, it } from 'vitest';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';
import { MAIN_ANSWER, type VllmWording, type WindowedCall, type WindowedProvider } from '../helpers/windowed-provider.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * A small-window model (llama.cpp or vLLM serving 1.5k to 32k tokens) is its own summarizer by
 * default, and its window holds the summarizer's calls as it holds the client's. The gateway sizes
 * those calls to the window the refusal stated (prompt, instructions and the summary's max_tokens
 * together), and where no window was stated yet, a summarizer call refused as overlong teaches it
 * and the middle is chunked again: the compaction ends in a summary, never in the fallback.
 */

/** More summarizer calls than this for one compaction means the chunking has gone wrong. */
const MAX_SUMMARIZER_CALLS = 12;

let provider: WindowedProvider;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await provider?.close();
});

/**
 * A coding agent's conversation: a short system prompt and task, then `rounds` read_file rounds,
 * ending on a tool result as agents do. The rounds' text adds up to about `windows` windows (the
 * whole body, JSON and tool calls included, counts about a third more); a `prose` share of it is
 * the assistant's own notes, which masking old tool outputs leaves whole, so only a summary can
 * bring the conversation under the window. Deterministic: every run sends the same bytes.
 */
function agentMessages(window: number, { windows = 3, rounds = 24, prose = 0.5 } = {}): any[] {
  const roundBytes = (window * 4 * windows) / rounds;
  const messages: any[] = [
    { role: 'system', content: 'You are a coding agent. Keep diffs small and run the tests.' },
    { role: 'user', content: 'The build fails on src/server.ts; find out why and fix it.' },
  ];
  for (let t = 0; t < rounds; t++) messages.push(...toolRound(t, Math.round(roundBytes * prose), Math.round(roundBytes * (1 - prose))));
  return messages;
}

function toolRound(t: number, noteBytes: number, outputBytes: number): any[] {
  const id = `call_${t}`;
  const note = lines(
    noteBytes,
    (n) => `Round ${t}, note ${n}: the handler in src/f${t}.ts retries ${n % 4} times before it gives up, so next I read src/f${t + 1}.ts.`,
  );
  return [
    {
      role: 'assistant',
      content: note || null,
      tool_calls: [{ id, type: 'function', function: { name: 'read_file', arguments: `{"path":"src/f${t}.ts"}` } }],
    },
    {
      role: 'tool',
      tool_call_id: id,
      content: lines(
        outputBytes,
        (n) => `src/f${t}.ts:${n}: const value${n} = await handler(request, { retry: ${n % 4} }) ${n % 9 === 0 ? '// café ✓ →' : ''}`,
      ),
    },
  ];
}

/** About `chars` characters of numbered lines. */
function lines(chars: number, line: (n: number) => string): string {
  const out: string[] = [];
  for (let n = 1, length = 0; length < chars; n++) {
    out.push(line(n));
    length += out[out.length - 1].length + 1;
  }
  return out.join('\n').slice(0, chars);
}

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'read_file',
      description: 'Read a file',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    },
  },
];

function chatBody(messages: any[], maxTokens: number | undefined): Record<string, unknown> {
  return { model: 'local-model', messages, tools: TOOLS, ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }), temperature: 0.2 };
}

/** The second turn: the first one answered, a new instruction, and one more tool round. */
function nextTurn(messages: any[], window: number): any[] {
  return [
    ...messages,
    { role: 'assistant', content: MAIN_ANSWER },
    { role: 'user', content: 'Now run the tests and tell me what still fails.' },
    ...toolRound(100, Math.round(window / 4), Math.round(window / 2)),
  ];
}

/** What a failure message needs to say about a call: its kind, counted tokens and verdict. */
function describeCall(c: WindowedCall): string {
  return `${c.summarizer ? 'summarizer' : 'main'} call: ${c.promptTokens} prompt + ${c.completionTokens ?? 'no limit'} completion tokens -> ${c.status}${c.error ? `: ${c.error.slice(0, 200)}` : ''}`;
}

/** What the gateway said about its rescue, for a failure message. */
function rescueLog(): string {
  const lines = gateway
    .logLines()
    .filter((l) => /summar|compact|rescue|overlong|replay/i.test(`${l.msg ?? ''} ${JSON.stringify(l.compaction ?? '')}`));
  return JSON.stringify(lines.slice(-8), null, 1).slice(0, 4_000);
}

/**
 * One turn through the gateway, checked as a user sees it: the answer, a summary (not the
 * fallback) in the header, and every call the stand-in received during the turn.
 */
async function turn(body: Record<string, unknown>) {
  const before = provider.calls().length;
  const res = await postChat(gateway, body);
  const calls = provider.calls().slice(before);
  const summarizer = calls.filter((c) => c.summarizer);
  const main = calls.filter((c) => !c.summarizer);
  const context = `${calls.map(describeCall).join('\n')}\n${rescueLog()}`;
  expect(res.status, context).toBe(200);
  expect(res.json.choices[0].message.content).toBe(MAIN_ANSWER);
  const header = parseCompactionHeader(res.headers.get('x-gateway-compaction'));
  expect(header.strategy, context).toBe('summarize');
  expect(header, context).not.toHaveProperty('summarizer-failure');
  expect(summarizer.length, context).toBeLessThanOrEqual(MAX_SUMMARIZER_CALLS);
  // What the client's answer came from: the last request the stand-in saw, accepted, so within
  // the window (the stand-in refuses any request, summarizer calls too, that is not).
  const replay = main.at(-1)!;
  expect(replay.status, context).toBe(200);
  // The summary in the replay is the newest one the stand-in wrote (this turn's, or a remembered one).
  const summary = provider
    .summarizerCalls()
    .filter((c) => c.status === 200)
    .at(-1)?.answer;
  expect(summary, context).toBeDefined();
  expect(
    replay.received.json.messages.some((m: any) => typeof m.content === 'string' && m.content.includes(summary!)),
    context,
  ).toBe(true);
  return { res, header, calls, main, summarizer, replay, context };
}

describe.each<{ window: number; maxTokens: number; wording: VllmWording }>([
  { window: 1_500, maxTokens: 256, wording: 'vllm-0.9' },
  { window: 8_000, maxTokens: 1_024, wording: 'vllm-0.9' },
  { window: 32_000, maxTokens: 2_048, wording: 'vllm-0.9' },
  { window: 8_000, maxTokens: 1_024, wording: 'vllm-0.10' },
])('a $window-token window the refusal states ($wording)', ({ window, maxTokens, wording }) => {
  it('summarises in calls that each fit the window, replays once, and the next turn works too', async () => {
    provider = await startStandIn({ provider: 'windowed', window, wording });
    gateway = await startGateway({ upstream: { url: provider.baseUrl } });
    const messages = agentMessages(window);
    const first = await turn(chatBody(messages, maxTokens));
    expect(first.header).toMatchObject({ outcome: 'replayed', strategy: 'summarize' });
    // The client's request, refused for the window, then the one replay.
    expect(
      first.main.map((c) => c.status),
      first.context,
    ).toEqual([400, 200]);
    expect(first.main[0].promptTokens).toBeGreaterThan(2 * window);
    expect(first.summarizer.length, first.context).toBeGreaterThanOrEqual(1);
    expectValidReplay(first.main[0].received, first.replay.received);
    // The window was stated before the first summarizer call: every one of them must fit it.
    expect(first.summarizer.filter((c) => c.status !== 200).map(describeCall)).toEqual([]);

    const second = await turn(chatBody(nextTurn(messages, window), maxTokens));
    expect(['replayed', 'compacted']).toContain(second.header.outcome);
    expect(second.summarizer.filter((c) => c.status !== 200).map(describeCall)).toEqual([]);
  }, 60_000);
});

describe('no window stated before the first summarizer call', () => {
  it('old vLLM (no max_tokens: "max_tokens must be at least 1, got -N"): the summarizer refusal teaches the window and the middle is chunked again', async () => {
    const window = 1_500;
    provider = await startStandIn({ provider: 'windowed', window, wording: 'vllm-0.4' });
    gateway = await startGateway({ upstream: { url: provider.baseUrl } });
    // About two windows: what the gateway aims at with no limit stated (a share of the refused
    // size) fits the window, the whole middle in one summarizer call does not.
    const messages = agentMessages(window, { windows: 1.2, rounds: 12, prose: 0.8 });
    const first = await turn(chatBody(messages, undefined));
    expect(first.header).toMatchObject({ outcome: 'replayed', strategy: 'summarize' });
    expect(
      first.main.map((c) => c.status),
      first.context,
    ).toEqual([400, 200]);
    expect(first.main[0].error).toMatch(/^max_tokens must be at least 1, got -\d+\.$/);
    expectValidReplay(first.main[0].received, first.replay.received);
    // The summarizer met the window first, then summarised in calls that fit it.
    const refused = first.summarizer.filter((c) => c.status !== 200);
    expect(refused.length, first.context).toBeGreaterThanOrEqual(1);
    for (const c of refused) expect(c.error, describeCall(c)).toMatch(/^This model's maximum context length is 1500 tokens\./);
    expect(first.summarizer.at(-1)!.status).toBe(200);

    const second = await turn(chatBody(nextTurn(messages, window), undefined));
    expect(['replayed', 'compacted']).toContain(second.header.outcome);
  }, 60_000);

  it('behind nginx (a 413 page with no numbers): a summarizer call refused by nginx or the window is chunked again', async () => {
    const window = 1_500;
    // nginx's limit a little above the window's bytes: the client's request meets nginx first.
    provider = await startStandIn({ provider: 'windowed', window, bodyLimitBytes: 8_000 });
    gateway = await startGateway({ upstream: { url: provider.baseUrl } });
    const messages = agentMessages(window, { windows: 1.1, rounds: 12, prose: 0.8 });
    const first = await turn(chatBody(messages, 256));
    expect(first.header).toMatchObject({ outcome: 'replayed', strategy: 'summarize', reason: 'body_too_large' });
    expect(
      first.main.map((c) => c.status),
      first.context,
    ).toEqual([413, 200]);
    expectValidReplay(first.main[0].received, first.replay.received);
    const refused = first.summarizer.filter((c) => c.status !== 200);
    expect(refused.length, first.context).toBeGreaterThanOrEqual(1);
    expect(first.summarizer.at(-1)!.status).toBe(200);

    const second = await turn(chatBody(nextTurn(messages, window), 256));
    expect(['replayed', 'compacted']).toContain(second.header.outcome);
  }, 60_000);
});
