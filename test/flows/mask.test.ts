import OpenAI from 'openai';
import { afterEach, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { parseCompactionHeader, toolTurnsBody } from '../helpers/rescue.js';
import { total } from '../helpers/exposition.js';

/*
 * The masking rung as an agent meets it, through the official SDK: an overflowing conversation is
 * rescued with its old tool outputs replaced by one line each, no summarizer call, and the next
 * turn reuses the masked prefix byte for byte.
 */

let provider: StandIn;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

const output = (turn: number) => `contents of src/file${turn}.ts\n${'const x = 1;\n'.repeat(400)}Exit code: 0`;
const PLACEHOLDER = /^\[tool output omitted by compaction-gateway: read_file, 5\.\d KB; src\/f\d+\.ts; exit 0\]$/;

async function turn(body: Record<string, any>) {
  const sdk = new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'sk-test', maxRetries: 0 });
  const { data, response } = await sdk.chat.completions.create(body as never).withResponse();
  return { answer: data.choices[0].message.content, header: parseCompactionHeader(response.headers.get('x-gateway-compaction')) };
}

it('masks the oldest outputs until the request fits: no summarizer call, every message in place, the newest output whole', async () => {
  provider = await startStandIn({ limitBytes: 40_000, reply: () => ({ text: 'rescued answer' }) });
  gateway = await startGateway({ upstream: { url: provider.baseUrl } });
  const body = toolTurnsBody(10, output);
  const { answer, header } = await turn(body);
  expect(answer).toBe('rescued answer');
  expect(header).toMatchObject({ outcome: 'replayed', strategy: 'mask', memory: 'miss' });
  expect(header['summarizer-failure']).toBeUndefined();
  expect(provider.summarizerCalls()).toHaveLength(0);

  const [refused, replay] = provider.calls('chat');
  // Refused as past the window, the replay taken by the strict rules.
  expect(provider.verdicts('chat')).toEqual([expect.stringMatching(/maximum context length is 10000 tokens/), null]);
  expect(refused.body.length).toBeGreaterThan(40_000);
  expect(replay.body.length).toBeLessThanOrEqual(40_000);
  const sent = replay.json.messages;
  expect(sent).toHaveLength(body.messages.length);
  const masked = sent.filter((m: any, i: number) => JSON.stringify(m) !== JSON.stringify(body.messages[i]));
  expect(masked.length).toBeGreaterThan(0);
  for (const m of masked) {
    expect(m.role).toBe('tool');
    expect(m.content).toMatch(PLACEHOLDER);
  }
  // Oldest first: every masked output comes before every whole one.
  const tools = sent.map((m: any, i: number) => ({ m, i })).filter(({ m }: any) => m.role === 'tool');
  const lastMasked = Math.max(...tools.filter(({ m }: any) => PLACEHOLDER.test(m.content)).map(({ i }: any) => i));
  expect(tools.filter(({ m, i }: any) => i < lastMasked && !PLACEHOLDER.test(m.content))).toEqual([]);
  expect(sent.at(-1)).toEqual(body.messages.at(-1));

  const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
  expect(metrics).toContain('gateway_compactions_total{api="chat",strategy="mask",outcome="replayed",upstream="default"} 1');
  expect(metrics).toMatch(/gateway_compaction_removed_bytes_total\{api="chat"\} [1-9]\d{3,}/);
  expect(total(metrics, 'gateway_summarizer_calls_total')).toBe(0);
});

it('the next turn is sent masked before its first attempt, the masked prefix byte for byte', async () => {
  provider = await startStandIn({ limitBytes: 40_000 });
  gateway = await startGateway({ upstream: { url: provider.baseUrl } });
  const first = toolTurnsBody(10, output);
  await turn(first);
  const replayed = provider.calls('chat')[1].json.messages;
  const next = toolTurnsBody(11, output);
  const { header } = await turn(next);
  expect(header).toMatchObject({ memory: 'hit', strategy: 'mask' });
  // One upstream call for the second turn: it went compacted ahead, and was accepted.
  expect(provider.calls('chat')).toHaveLength(3);
  expect(provider.verdicts('chat')).toEqual([expect.stringMatching(/maximum context length/), null, null]);
  const sent = provider.calls('chat')[2].json.messages;
  const lastMaskedBefore = replayed.findLastIndex((m: any) => m.role === 'tool' && PLACEHOLDER.test(m.content));
  expect(sent.slice(0, lastMaskedBefore + 1)).toEqual(replayed.slice(0, lastMaskedBefore + 1));
  expect(provider.summarizerCalls()).toHaveLength(0);
});

it('with masking off, the summarizer condenses instead, as before', async () => {
  provider = await startStandIn({ limitBytes: 40_000 });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, compaction: { mask: false } });
  const { header } = await turn(toolTurnsBody(10, output));
  expect(header).toMatchObject({ outcome: 'replayed', strategy: 'summarize' });
  expect(provider.verdicts('chat')).toEqual([expect.stringMatching(/maximum context length/), null]);
  // The summarizer is the upstream's own model: its calls are chunked to fit the window it stated.
  expect(provider.summarizerCalls().length).toBeGreaterThanOrEqual(1);
  for (const call of provider.summarizerCalls()) expect(call.body.length).toBeLessThanOrEqual(40_000);
});
