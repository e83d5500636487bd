import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { HAVE_REDIS, startRedis, type TestRedis } from '../helpers/redis.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { BINDING_BETA, type StrictAnthropic, type StrictAnthropicReject } from '../helpers/strict-anthropic.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * A Claude Code-like agent on the official SDK, through the gateway, against a stand-in that
 * enforces preserved thinking: every answer starts with a thinking block signed for the request it
 * answered, and every block sent back is checked against what came before it. The agent returns
 * every block it got, as Claude Code does. The session overflows, is rescued, and goes on under the
 * compacted prefix: no binding refusal may reach the stand-in's agent, and no invalid block may
 * reach the stand-in except where the request allowed it to be dropped.
 */

const TURNS = 12;
const RESULT_BYTES = 6_000;
const LIMIT = 46_000; // the 8th request is the first over it

let upstream: StrictAnthropic;
const gateways: TestGateway[] = [];
let redis: TestRedis | undefined;
afterEach(async () => {
  for (const g of gateways.splice(0)) await g.close();
  await upstream?.close();
  await redis?.stop();
  redis = undefined;
});

type ThinkingType = 'adaptive' | 'enabled';

interface Turn {
  header: Record<string, string | number> | null;
  /** Upstream calls for the turn, and the thinking blocks the last one carried. */
  calls: number;
  thinkingSent: number;
}

const file = (n: number) =>
  `// src/module${n}.ts\n${`export const value${n} = ${n}; // a line of the file\n`.repeat(Math.ceil(RESULT_BYTES / 44))}`.slice(
    0,
    RESULT_BYTES,
  );

/** An agent that keeps its whole history and sends it every turn; each answer asks to read one more file. */
class Agent {
  readonly messages: any[] = [{ role: 'user', content: [{ type: 'text', text: 'Review every file under src/ one by one.' }] }];
  /** Every answer as the SDK gave it. */
  readonly answers: Anthropic.Message[] = [];
  constructor(
    private readonly thinking: ThinkingType,
    private readonly stream: boolean,
  ) {}

  params() {
    return {
      model: 'claude-opus-5-5',
      max_tokens: 4_000,
      system: [{ type: 'text', text: 'You are a coding agent.', cache_control: { type: 'ephemeral' } }],
      tools: [
        {
          name: 'Read',
          description: 'Read a file',
          input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
        },
      ],
      thinking: this.thinking === 'adaptive' ? { type: 'adaptive' } : { type: 'enabled', budget_tokens: 2_000 },
      messages: this.messages,
    };
  }

  /** One turn through `baseURL`: the answer appended as it came, then the tool's result. */
  async turn(baseURL: string): Promise<Record<string, string | number> | null> {
    const client = new Anthropic({ baseURL, apiKey: 'sk-ant-agent', maxRetries: 0 });
    const params = this.params() as any;
    const { data, response } = this.stream
      ? await client.messages
          .stream(params)
          .withResponse()
          .then(async ({ data: s, response: r }) => ({ data: await s.finalMessage(), response: r }))
      : await client.messages.create(params).withResponse();
    const message = data;
    this.answers.push(message);
    this.messages.push({ role: 'assistant', content: message.content.map(({ citations: _c, ...block }: any) => block) });
    const use = message.content.find((b) => b.type === 'tool_use') as Anthropic.ToolUseBlock;
    const n = this.messages.length;
    this.messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: file(n) }] });
    const header = response.headers.get('x-gateway-compaction');
    return header ? parseCompactionHeader(header) : null;
  }
}

let tools = 0;
const readNext = () => ({ toolUse: { id: `toolu_${++tools}`, name: 'Read', input: { path: `src/module${tools}.ts` } } });

async function start(style: StrictAnthropicReject, memory: Record<string, unknown> = {}): Promise<TestGateway> {
  const gateway = await startGateway({ upstream: { url: upstream.baseUrl }, memory });
  gateways.push(gateway);
  return gateway;
}

const thinkingIn = (body: any) =>
  (body.messages as any[]).flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((b: any) => b.type === 'thinking').length;

/** Runs the session, each turn through `route(turn)`, and records what each turn cost. */
async function session(agent: Agent, route: (turn: number) => string | Promise<string>): Promise<Turn[]> {
  const turns: Turn[] = [];
  for (let t = 1; t <= TURNS; t++) {
    const before = upstream.messageCalls().length;
    const header = await agent.turn(await route(t));
    const calls = upstream.messageCalls().slice(before);
    turns.push({ header, calls: calls.length, thinkingSent: thinkingIn(calls.at(-1)!.json) });
  }
  return turns;
}

/** What the stand-in saw: no binding refusal, and no invalid block except under drop_block. */
function expectNoBindingTrouble(): void {
  const refused = upstream
    .checks()
    .filter((c) => c.refused !== null && !/too long|too large|Too Large|exceeds the maximum/.test(c.refused));
  expect(refused.map((c) => c.refused)).toEqual([]);
  for (const check of upstream.checks())
    if (check.invalid.length > 0) expect(check, 'an invalid block the request did not allow to drop').toMatchObject({ dropBlock: true });
}

/** The turns as the headers tell them: plain until the overflow, then one replay, then compacted ahead. */
function expectRescuedSession(turns: Turn[], thinking: ThinkingType): void {
  const first = turns.findIndex((t) => t.header !== null);
  expect(first + 1, 'the first overflowing turn').toBe(8);
  expect(turns.slice(0, first).every((t) => t.calls === 1 && t.thinkingSent === turns.indexOf(t))).toBe(true);
  const rescue = turns[first];
  expect(rescue.header).toMatchObject({ outcome: 'replayed', 'block-binding': thinking === 'enabled' ? 'drop_block' : 'none' });
  // Adaptive: every kept block was stale, the open round's too. Enabled: the open round's stays.
  expect(rescue.header!['thinking-stripped']).toBeGreaterThanOrEqual(thinking === 'adaptive' ? 1 : 0);
  // Under drop_block the upstream drops the open round's stale block and says so.
  if (thinking === 'enabled') expect(rescue.header!['reasoning-dropped']).toBe(1);
  expect(rescue.calls).toBe(2);
  for (const later of turns.slice(first + 1)) {
    expect(later.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
    expect(later.calls).toBe(1);
  }
  // Blocks made after the compaction come back untouched while its prefix holds: thinking grows again.
  expect(Math.max(...turns.slice(first + 1).map((t) => t.thinkingSent))).toBeGreaterThanOrEqual(2);
}

describe.each<[ThinkingType, StrictAnthropicReject, boolean]>([
  ['adaptive', 'prompt_too_long', true],
  ['adaptive', 'json_413', false],
  ['adaptive', 'sse_error', true],
  ['enabled', 'prompt_too_long', false],
  ['enabled', 'edge_413', true],
  ['enabled', 'sse_error', true],
])('thinking %s, refused as %s (stream %s)', (thinking, style, stream) => {
  it('a 12-turn session finishes; no binding refusal, no invalid block but those allowed to drop', async () => {
    upstream = await startStandIn({ provider: 'anthropic', limitBytes: LIMIT, style, reply: readNext });
    const gateway = await start(style);
    const agent = new Agent(thinking, stream);
    const turns = await session(agent, () => gateway.origin);
    expectRescuedSession(turns, thinking);
    expectNoBindingTrouble();
    // What the upstream said it dropped reaches the client unchanged.
    if (thinking === 'enabled' && !stream) {
      const rescued = agent.answers[turns.findIndex((t) => t.header !== null)] as unknown as { input_transformations: unknown };
      expect(rescued.input_transformations).toEqual([
        { type: 'thinking_dropped', path: expect.stringMatching(/^messages\.\d+\.content\.0$/), reason: 'prefix_binding_mismatch' },
      ]);
    }
    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    expect(metrics).toContain('gateway_binding_refusals_total{api="messages",request="compacted"} 0');
    expect(metrics).toMatch(/gateway_bound_blocks_total\{api="messages",action="stripped"\} [1-9]/);
  });
});

describe('the compacted prefix across gateways', () => {
  it.skipIf(!HAVE_REDIS)('two replicas sharing Redis, turns alternating between them: the same prefix, no refusal', async () => {
    redis = await startRedis();
    upstream = await startStandIn({ provider: 'anthropic', limitBytes: LIMIT, style: 'prompt_too_long', reply: readNext });
    const a = await start('prompt_too_long', { redisUrl: redis.url });
    const b = await start('prompt_too_long', { redisUrl: redis.url });
    const turns = await session(new Agent('adaptive', true), (t) => (t % 2 === 0 ? a.origin : b.origin));
    expectRescuedSession(turns, 'adaptive');
    expectNoBindingTrouble();
  });

  it('a restart that loses the memory: the next turn is rescued again, every block after the new edit point stale', async () => {
    upstream = await startStandIn({ provider: 'anthropic', limitBytes: LIMIT, style: 'json_413', reply: readNext });
    let gateway = await start('json_413');
    const agent = new Agent('adaptive', false);
    const turns = await session(agent, async (t) => {
      if (t === 10) {
        await gateway.close();
        gateway = await start('json_413');
      }
      return gateway.origin;
    });
    expect(turns[9].header).toMatchObject({ outcome: 'replayed', 'block-binding': 'none' });
    expect(turns[9].header!['thinking-stripped']).toBeGreaterThanOrEqual(2);
    expect(turns[9].calls).toBe(2);
    expectNoBindingTrouble();
  });
});

describe('a refusal of bound thinking', () => {
  it.each<ThinkingType>(['adaptive', 'enabled'])(
    'of the gateway\u2019s own rewrite (the client edited a kept message), thinking %s: sent once more with all of it stripped, and remembered',
    async (thinking) => {
      upstream = await startStandIn({ provider: 'anthropic', limitBytes: LIMIT, style: 'json_413', reply: readNext });
      const gateway = await start('json_413');
      const agent = new Agent(thinking, false);
      const headers: Array<Record<string, string | number> | null> = [];
      for (let t = 1; t <= 9; t++) headers.push(await agent.turn(gateway.origin));
      expect(headers[8]).toMatchObject({ outcome: 'compacted' });
      // The agent rewrites the newest-but-one tool result (after the summary, before blocks still kept).
      const edited = agent.messages.length - 3;
      agent.messages[edited] = {
        ...agent.messages[edited],
        content: [{ ...agent.messages[edited].content[0], content: 'the file, read again' }],
      };
      const before = upstream.messageCalls().length;
      const retried = await agent.turn(gateway.origin);
      expect(retried).toMatchObject({ outcome: 'compacted', 'binding-retry': 1 });
      const calls = upstream.messageCalls().slice(before);
      expect(calls).toHaveLength(2);
      expect(upstream.checks().at(-2)!.refused).toMatch(
        /^messages\.\d+\.content\.0: Invalid `signature` in `thinking` block\. The block is bound to a different conversation\./,
      );
      // All of it stripped; with thinking enabled but for the open round's, which must lead its message (under drop_block).
      expect(thinkingIn(calls[1].json)).toBe(thinking === 'enabled' ? 1 : 0);
      expect(retried!['block-binding']).toBe(thinking === 'enabled' ? 'drop_block' : 'none');
      // The next turns strip them from the start, as remembered: no refusal.
      for (let t = 0; t < 2; t++) {
        const next = upstream.messageCalls().length;
        expect(await agent.turn(gateway.origin)).toMatchObject({ outcome: 'compacted', 'thinking-stripped': expect.any(Number) });
        expect(upstream.messageCalls().slice(next)).toHaveLength(1);
        expect(upstream.checks().at(-1)!.refused).toBeNull();
      }
      const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
      expect(metrics).toContain('gateway_binding_refusals_total{api="messages",request="compacted"} 1');
    },
  );

  it('of a request the gateway did not rewrite is the client\u2019s: relayed byte for byte, not retried', async () => {
    upstream = await startStandIn({ provider: 'anthropic', reply: readNext });
    const gateway = await start('json_413');
    const agent = new Agent('adaptive', false);
    for (let t = 1; t <= 3; t++) await agent.turn(gateway.origin);
    agent.messages[2] = { ...agent.messages[2], content: [{ ...agent.messages[2].content[0], content: 'edited' }] };
    const before = upstream.messageCalls().length;
    const res = await fetch(`${gateway.origin}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-agent', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify(agent.params()),
    });
    const body = await res.text();
    expect(res.status).toBe(400);
    expect(res.headers.get('x-gateway-compaction')).toBeNull();
    expect(upstream.messageCalls().slice(before)).toHaveLength(1);
    expect(JSON.parse(body).error.message).toBe(upstream.checks().at(-1)!.refused);
    expect(body).toContain('That setting requires the `thinking-binding-controls-2026-08-01` value');
    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    expect(metrics).toContain('gateway_binding_refusals_total{api="messages",request="client"} 1');
  });
});

it('the beta is appended once to the caller\u2019s own list', async () => {
  upstream = await startStandIn({ provider: 'anthropic', limitBytes: LIMIT, style: 'prompt_too_long', reply: readNext });
  const gateway = await start('prompt_too_long');
  const agent = new Agent('enabled', false);
  for (let t = 1; t <= 8; t++) await agent.turn(gateway.origin);
  const replay = upstream.messageCalls().at(-1)!;
  expect(replay.json.thinking.block_binding).toEqual({ prefix_mismatch_behavior: 'drop_block' });
  expect(
    String(replay.headers['anthropic-beta'])
      .split(',')
      .filter((b) => b === BINDING_BETA),
  ).toHaveLength(1);
});
