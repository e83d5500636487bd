import OpenAI from 'openai';
import { afterEach, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { parseCompactionHeader } from '../helpers/compaction-header.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { agentRequest } from '../helpers/rescue.js';

/*
 * GET /status.json after an agent's request was rescued through the gateway: the decision with
 * the figures its x-gateway-compaction header said, what became of each item, the summary the
 * model got, the totals per upstream and API; and nothing secret, whatever the config holds.
 */

let provider: StandIn;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

const SECRETS = {
  upstreamKey: 'sk-upstream-SECRET-a1',
  clientKey: 'sk-client-SECRET-b2',
  metricsKey: 'metrics-SECRET-c3',
  urlPassword: 'pw-SECRET-d4',
  urlKey: 'q-SECRET-e5',
  header: 'hdr-SECRET-f6',
};

async function rescued() {
  provider = await startStandIn({ limitBytes: 60_000, reply: () => ({ text: 'rescued answer' }) });
  gateway = await startGateway({
    upstream: { url: provider.baseUrl, apiKey: SECRETS.upstreamKey },
    upstreams: {
      other: {
        url: `https://agent:${SECRETS.urlPassword}@other.example/v1?api-key=${SECRETS.urlKey}`,
        apis: ['messages'],
        windows: [{ model: 'claude-*', tokens: 200_000 }],
      },
    },
    auth: { metricsKey: SECRETS.metricsKey },
    summarizer: { maxInputTokens: 500_000 },
  });
  const sdk = new OpenAI({
    baseURL: gateway.baseUrl,
    apiKey: SECRETS.clientKey,
    maxRetries: 0,
    defaultHeaders: { 'x-agent-note': SECRETS.header },
  });
  const body = agentRequest(60);
  const { response } = await sdk.chat.completions.create(body as never).withResponse();
  return { header: parseCompactionHeader(response.headers.get('x-gateway-compaction')), body };
}

it('shows the rescue with the figures of its header, its items, and the summary the model got', async () => {
  const { header, body } = await rescued();
  expect(header).toMatchObject({ outcome: 'replayed', strategy: 'summarize' });
  const res = await fetch(`${gateway.origin}/status.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.headers.get('cache-control')).toBe('no-store');
  const doc: any = await res.json();

  expect(doc.recent).toMatchObject({ capacity: 50, decisions: 1 });
  expect(doc.recent.entries).toHaveLength(1);
  const [entry] = doc.recent.entries;
  const [refused, replay] = provider.calls('chat');
  expect(entry).toMatchObject({
    upstream: 'default',
    api: 'chat',
    model: 'fake-model',
    trigger: 'rejected',
    outcome: 'replayed',
    reason: 'context_length',
    rejectedStatus: 400,
    strategy: 'summarize',
    limit: 'stated',
    windowTokens: 15_000,
    before: { items: body.messages.length, bytes: refused.body.length, tokens: header['tokens-before'] },
    after: { items: replay.json.messages.length, bytes: replay.body.length, tokens: header['tokens-after'] },
    memory: 'miss',
    cut: 0,
    summarizer: { calls: provider.summarizerCalls().length, ms: header['summarizer-ms'] },
    replayStatus: 200,
  });
  expect(entry.requestId).toMatch(/^[0-9a-f-]{36}$/);
  expect(entry.summarizer.inputTokens).toBeGreaterThan(0);

  // Every item of the request, once, in order: kept and pinned ones are the replay's, beside one summary.
  const runs: Array<{ from: number; to: number; fate: string }> = entry.items;
  expect(runs[0].from).toBe(0);
  expect(runs.at(-1)!.to).toBe(body.messages.length);
  for (let i = 1; i < runs.length; i++) expect(runs[i].from).toBe(runs[i - 1].to);
  const count = (fate: string) => runs.filter((r) => r.fate === fate).reduce((n, r) => n + r.to - r.from, 0);
  expect(count('condensed')).toBeGreaterThan(100);
  expect(count('kept') + count('pinned') + 1).toBe(replay.json.messages.length);

  // The summary is the text the replay carried in place of the condensed items.
  expect(entry.content.summary).toMatch(/^SUMMARY of \d+ chars/);
  expect(JSON.stringify(replay.json.messages)).toContain(entry.content.summary);
  expect(entry.content.summaryChars).toBe(entry.content.summary.length);
  expect(entry.content.trail.changed.length).toBeGreaterThan(0);
  expect(doc.content).toEqual({ shown: true, why: 'the gateway listens on loopback (127.0.0.1) only' });

  expect(doc.totals).toEqual([
    {
      upstream: 'default',
      api: 'chat',
      requests: 1,
      refused: 1,
      truncated: 0,
      rescued: 1,
      ahead: 0,
      failed: {},
      summarizerCalls: provider.summarizerCalls().length,
      summarizerTokens: { input: entry.summarizer.inputTokens, output: entry.summarizer.outputTokens },
      tokensRemoved: Number(header['tokens-before']) - Number(header['tokens-after']),
    },
  ]);
});

it('says what the gateway is: upstreams without credentials, their windows, auth, memory', async () => {
  await rescued();
  // A request that fits: its answer's prompt count calibrates the model's bytes per token.
  await new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'k', maxRetries: 0 }).chat.completions.create(agentRequest(3) as never);
  const doc: any = await (await fetch(`${gateway.origin}/status.json`)).json();
  expect(doc.gateway).toMatchObject({
    version: expect.stringMatching(/^\d+\.\d+\.\d+/),
    auth: { gatewayKeys: false, metricsKey: true },
    memory: 'local (in-process)',
    compaction: 'summarize',
    proactive: true,
  });
  expect(doc.gateway.listening).toBe(`127.0.0.1:${new URL(gateway.origin).port}`);
  expect(doc.upstreams).toEqual([
    {
      name: 'default',
      url: `${provider.baseUrl}`,
      apis: ['chat', 'responses', 'messages', 'gemini'],
      windows: { declared: [], discover: false, learned: [{ model: 'fake-model', bytesPerToken: expect.any(Number) }] },
    },
    {
      name: 'other',
      url: 'https://other.example/v1',
      apis: ['messages'],
      windows: { declared: [{ model: 'claude-*', tokens: 200_000, completionCounted: true }], discover: false, learned: [] },
    },
  ]);
});

it('holds no key, password or header value, in the JSON or on the page', async () => {
  await rescued();
  for (const path of ['/status.json', '/status']) {
    const text = await (await fetch(`${gateway.origin}${path}`)).text();
    expect(text.length).toBeGreaterThan(1000);
    expect(text).not.toMatch(/SECRET/);
    expect(text).not.toContain('agent:');
  }
  // Only the summary the gateway wrote is content: nothing of the request was kept besides it.
  const doc: any = await (await fetch(`${gateway.origin}/status.json`)).json();
  expect(Object.keys(doc.recent.entries[0].content).sort()).toEqual(['summary', 'summaryChars', 'trail']);
});

it(`keeps the last 50 decisions however many were made, and says how many`, async () => {
  provider = await startStandIn({ limitBytes: 60_000, reply: () => ({ text: 'ok' }) });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, compaction: { strategy: 'fallback' } });
  const sdk = new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'k', maxRetries: 0 });
  // The first is rescued; the same conversation after it is compacted ahead from memory.
  for (let i = 0; i < 55; i++) await sdk.chat.completions.create(agentRequest(60) as never);
  const doc: any = await (await fetch(`${gateway.origin}/status.json`)).json();
  expect(doc.recent.decisions).toBe(55);
  expect(doc.recent.entries).toHaveLength(50);
  expect(doc.recent.entries.map((e: any) => e.id)).toEqual(Array.from({ length: 50 }, (_, i) => 55 - i));
  expect(doc.recent.entries.every((e: any) => e.outcome === 'compacted' && e.trigger === 'proactive')).toBe(true);
  expect(doc.totals).toEqual([expect.objectContaining({ requests: 55, refused: 1, rescued: 1, ahead: 54 })]);
  const page = await (await fetch(`${gateway.origin}/status`)).text();
  expect(page.match(/<li class="decision /g)).toHaveLength(50);
  expect(page).toContain('The last 50 of 55, newest first');
});
