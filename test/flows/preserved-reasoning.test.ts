import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { HAVE_REDIS, startRedis, type TestRedis } from '../helpers/redis.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import type { StrictResponses, StrictResponsesReject } from '../helpers/strict-responses.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * A Codex-like agent on the official OpenAI SDK (store: false, encrypted reasoning included, the
 * whole history resent every turn) through the gateway, against a stand-in that binds each
 * reasoning item to the history before it and drops a stale one silently, listing it in the
 * answer's input_transformations. A compaction changes the history before the kept reasoning: the
 * gateway keeps each reasoning item with its call (the API refuses a call without it), lets the
 * provider drop the stale ones, and reports how many; items made after the compaction, under a
 * compacted prefix rebuilt byte for byte, are never dropped.
 */

const TURNS = 12;
const LIMIT = 46_000;
const OUTPUT_BYTES = 6_000;

let upstream: StrictResponses;
let gateway: TestGateway;
const others: TestGateway[] = [];
let redis: TestRedis | undefined;
afterEach(async () => {
  await gateway?.close();
  for (const g of others.splice(0)) await g.close();
  await upstream?.close();
  await redis?.stop();
  redis = undefined;
});

let calls = 0;
const nextCall = () => ({
  call: { call_id: `call_${++calls}`, name: 'exec_command', arguments: JSON.stringify({ cmd: `cat src/module${calls}.ts` }) },
});

class Codex {
  readonly input: any[] = [
    { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex, a coding agent.' }] },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Review every file under src/ one by one.' }] },
  ];
  constructor(private readonly stream: boolean) {}

  async turn(baseURL: string): Promise<{ header: Record<string, string | number> | null }> {
    const client = new OpenAI({ baseURL, apiKey: 'sk-codex', maxRetries: 0 });
    const params: any = {
      model: 'gpt-6',
      input: this.input,
      tools: [{ type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } }],
      store: false,
      include: ['reasoning.encrypted_content'],
      stream: this.stream,
    };
    const { data, response } = await client.responses.create(params).withResponse();
    let output: any[];
    if (this.stream) {
      output = [];
      for await (const event of data as any) if (event.type === 'response.output_item.done') output.push(event.item);
    } else {
      output = (data as any).output;
    }
    this.input.push(...output);
    const call = output.find((o) => o.type === 'function_call');
    this.input.push({ type: 'function_call_output', call_id: call.call_id, output: `${'x'.repeat(OUTPUT_BYTES)}` });
    const header = response.headers.get('x-gateway-compaction');
    return { header: header ? parseCompactionHeader(header) : null };
  }
}

/** What the gateway made of a request's input: up to its summary, or its last masked output. */
function compactedPrefix(input: any[]): string | null {
  const summary = input.findIndex((item) => JSON.stringify(item).includes('[compaction-gateway]'));
  const at = Math.max(
    summary,
    input.findLastIndex((item) => JSON.stringify(item).includes('[tool output omitted by compaction-gateway: ')),
  );
  return at < 0 ? null : JSON.stringify(input.slice(0, at + 1));
}

/**
 * Every compacted turn: the header counts what the stand-in dropped; nothing made under the prefix
 * the turn was sent with is dropped; and while the prefix holds (the same summary or the same
 * masked outputs, reused as they were) the same stale items go.
 */
function expectNothingFreshDropped(headers: Array<Record<string, string | number> | null>, first: number): void {
  const calls = upstream.responseCalls();
  const checks = upstream.checks();
  const prefixes = calls.map((r) => compactedPrefix(r.json.input ?? []));
  const madeUnder = new Map<string, string | null>();
  for (const { call, items } of upstream.issued())
    for (const item of items as any[]) if (item.type === 'reasoning') madeUnder.set(item.id, prefixes[call]);
  const accepted = checks.flatMap((c, i) => (c.refused === null ? [i] : []));
  expect(accepted).toHaveLength(headers.length);
  for (let t = first; t < headers.length; t++) {
    const i = accepted[t];
    expect(headers[t]!['reasoning-dropped'], `turn ${t + 1}: the header counts what the provider dropped`).toBe(checks[i].removed.length);
    for (const id of checks[i].removed) {
      expect(madeUnder.has(id), `turn ${t + 1}: ${id} was issued by the stand-in`).toBe(true);
      expect(madeUnder.get(id), `turn ${t + 1}: ${id} was made under the prefix it was sent with`).not.toBe(prefixes[i]);
    }
    if (t > first && prefixes[i] === prefixes[accepted[t - 1]])
      expect(checks[i].removed, `turn ${t + 1}`).toEqual(checks[accepted[t - 1]].removed);
  }
}

describe.each<[StrictResponsesReject, boolean]>([
  ['context_length', false],
  ['edge_413', true],
  ['stream_failed', true],
])('refused as %s (stream %s)', (style, stream) => {
  it('a 12-turn session finishes; the stale reasoning of the kept tail is counted as dropped, none made after the compaction', async () => {
    upstream = await startStandIn({ provider: 'responses', limitBytes: LIMIT, style, reply: nextCall });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
    const agent = new Codex(stream);
    const headers: Array<Record<string, string | number> | null> = [];
    for (let t = 1; t <= TURNS; t++) headers.push((await agent.turn(gateway.baseUrl)).header);

    expect(upstream.checks().filter((c) => c.refused !== null && !/context window|Too Large|context_length/i.test(c.refused))).toEqual([]);
    const first = headers.findIndex((h) => h !== null);
    expect(first + 1, 'the first overflowing turn').toBe(8);
    const rescue = headers[first]!;
    expect(rescue).toMatchObject({ outcome: 'replayed' });
    expect(rescue['thinking-stripped'], 'the Responses API strips nothing itself').toBeUndefined();
    // The reasoning items of the kept tail were made before the summary: the provider drops them.
    const droppedThen = upstream.checks().at(-(TURNS - first))!.removed.length;
    expect(rescue['reasoning-dropped']).toBe(droppedThen);
    expect(droppedThen).toBeGreaterThan(0);
    // Under the same compacted prefix (a remembered summary or masked span reused as it was) nothing made since is dropped.
    for (const h of headers.slice(first + 1)) expect(h).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
    expectNothingFreshDropped(headers, first);
    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    expect(metrics).toMatch(/gateway_bound_blocks_total\{api="responses",action="dropped"\} [1-9]/);
    expect(metrics).toContain('gateway_bound_blocks_total{api="responses",action="stripped"} 0');
  });
});

describe('the provider\u2019s own compaction (summarizer.providerCompaction)', () => {
  async function run(compact: 'window' | 'missing' = 'window') {
    upstream = await startStandIn({ provider: 'responses', limitBytes: LIMIT, style: 'context_length', reply: nextCall, compact });
    // Masking off: the conversation is condensed, by the provider or the summarizer.
    gateway = await startGateway({
      upstream: { url: upstream.baseUrl },
      summarizer: { providerCompaction: true },
      compaction: { mask: false },
    });
    const agent = new Codex(false);
    const headers: Array<Record<string, string | number>> = [];
    for (let t = 1; t <= TURNS; t++) headers.push((await agent.turn(gateway.baseUrl)).header ?? {});
    return headers;
  }

  it('condenses with /responses/compact: the kept reasoning stays valid (none dropped), the window resent byte for byte', async () => {
    const headers = await run();
    const compacted = headers.filter((h) => h.outcome !== undefined);
    expect(compacted[0]).toMatchObject({ outcome: 'replayed', strategy: 'provider', 'reasoning-dropped': 0 });
    for (const h of compacted.slice(1)) expect(h).toMatchObject({ outcome: 'compacted', strategy: 'provider', 'reasoning-dropped': 0 });
    expect(upstream.checks().flatMap((c) => c.removed)).toEqual([]);
    // The compaction endpoint is the only condensing call; it got the middle as it was, reasoning included.
    const compactions = upstream.compactCalls();
    expect(compactions.length).toBeGreaterThanOrEqual(1);
    expect(upstream.summarizerCalls().length).toBe(compactions.length);
    expect(compactions[0].json.input.some((i: any) => i.type === 'reasoning')).toBe(true);
    // Turns under the same window send it byte for byte.
    const sent = upstream
      .responseCalls()
      .slice(-(TURNS - 7))
      .map((r) => JSON.stringify(r.json.input.find((i: any) => i.type === 'compaction')));
    const windows = new Set(sent);
    expect(windows.size).toBe(compactions.length);
    expect(compactions.length).toBeLessThan(TURNS - 7);
  });

  it.each([
    ['another summarizer model', { model: 'gpt-6-mini' }],
    ['a summarizer key of its own', { apiKey: 'sk-summarizer' }],
    ['a summarizer elsewhere', { url: 'http://127.0.0.1:9/v1' }],
  ])('not with %s: its window would be bound to other credentials or another model', async (_name, summarizer) => {
    upstream = await startStandIn({ provider: 'responses', limitBytes: LIMIT, style: 'context_length', reply: nextCall });
    gateway = await startGateway({
      upstream: { url: `${upstream.baseUrl}/` },
      summarizer: { providerCompaction: true, ...summarizer },
      compaction: { mask: false },
    });
    const agent = new Codex(false);
    for (let t = 1; t <= 8; t++) await agent.turn(gateway.baseUrl);
    expect(upstream.compactCalls()).toHaveLength(0);
  });

  it('with the upstream URL written with a trailing slash it is still the upstream', async () => {
    upstream = await startStandIn({ provider: 'responses', limitBytes: LIMIT, style: 'context_length', reply: nextCall });
    gateway = await startGateway({
      upstream: { url: `${upstream.baseUrl}/` },
      summarizer: { providerCompaction: true, url: upstream.baseUrl },
      compaction: { mask: false },
    });
    const agent = new Codex(false);
    for (let t = 1; t <= 8; t++) await agent.turn(gateway.baseUrl);
    expect(upstream.compactCalls()).toHaveLength(1);
  });

  it('a provider without it (404): the summarizer condenses instead, and the header says why', async () => {
    const headers = await run('missing');
    const first = headers.find((h) => h.outcome !== undefined)!;
    expect(first).toMatchObject({ outcome: 'replayed', strategy: 'summarize', 'provider-failure': 'rejected' });
    expect(first['reasoning-dropped']).toBeGreaterThan(0);
  });
});

describe('the compacted prefix across gateways', () => {
  it.skipIf(!HAVE_REDIS)('two replicas sharing Redis, turns alternating: under one summary none made after it is dropped', async () => {
    redis = await startRedis();
    upstream = await startStandIn({ provider: 'responses', limitBytes: LIMIT, style: 'context_length', reply: nextCall });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, memory: { redisUrl: redis.url } });
    const other = await startGateway({ upstream: { url: upstream.baseUrl }, memory: { redisUrl: redis.url } });
    others.push(other);
    const agent = new Codex(false);
    const headers: Array<Record<string, string | number> | null> = [];
    for (let t = 1; t <= TURNS; t++) headers.push((await agent.turn(t % 2 ? gateway.baseUrl : other.baseUrl)).header);
    const first = headers.findIndex((h) => h !== null);
    for (const h of headers.slice(first + 1)) expect(h).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
    expectNothingFreshDropped(headers, first);
  });

  it('a restart that loses the memory: rescued again from the client\u2019s request, the stale reasoning counted', async () => {
    upstream = await startStandIn({ provider: 'responses', limitBytes: LIMIT, style: 'context_length', reply: nextCall });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
    const agent = new Codex(false);
    for (let t = 1; t <= 9; t++) await agent.turn(gateway.baseUrl);
    await gateway.close();
    gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
    const { header } = await agent.turn(gateway.baseUrl);
    expect(header).toMatchObject({ outcome: 'replayed', trigger: 'rejected' });
    expect(header!['reasoning-dropped']).toBe(upstream.checks().at(-1)!.removed.length);
    expect(header!['reasoning-dropped']).toBeGreaterThan(0);
  });
});
