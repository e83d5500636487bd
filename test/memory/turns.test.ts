import { afterEach, describe, expect, it } from 'vitest';
import { agentConversation } from '../compaction/conversations.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';
import { LIMIT, firstOverflow, sessionRequest } from './session.js';
import { total } from '../helpers/exposition.js';

let provider: StandIn;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

const request = (turns: number) => sessionRequest(turns, { max_tokens: 300 });
const overflowAt = () => firstOverflow(LIMIT, { max_tokens: 300 });

/** The bytes of a replay body up to the end of its summary message (system prompt + summary). */
function summaryPrefix(body: Buffer): string {
  const text = body.toString('utf8');
  const json = JSON.parse(text);
  const summary = json.messages.find((m: any) => typeof m.content === 'string' && m.content.startsWith('[compaction-gateway]'));
  const end = text.indexOf(JSON.stringify(summary)) + JSON.stringify(summary).length;
  return text.slice(0, end);
}

const MASKED = '[tool output omitted by compaction-gateway: ';
const maskedCount = (body: Buffer) => body.toString('utf8').split(MASKED).length - 1;

/** The bytes of a replay body up to the end of its last masked tool output. */
function maskedPrefix(body: Buffer): string {
  const text = body.toString('utf8');
  const last = (JSON.parse(text).messages as any[]).findLast((m) => typeof m.content === 'string' && m.content.startsWith(MASKED));
  const at = text.lastIndexOf(JSON.stringify(last));
  expect(at).toBeGreaterThan(0);
  return text.slice(0, at + JSON.stringify(last).length);
}

async function turn(n: number, headers: Record<string, string> = {}) {
  const before = { chat: provider.calls('chat').length, summarizer: provider.summarizerCalls().length };
  const res = await postChat(gateway, request(n), { authorization: 'Bearer sk-tenant-a', ...headers });
  expect(res.status).toBe(200);
  const header = res.headers.get('x-gateway-compaction');
  return {
    header: header ? parseCompactionHeader(header) : null,
    chatCalls: provider.calls('chat').slice(before.chat),
    summarizerCalls: provider.summarizerCalls().slice(before.summarizer),
  };
}

describe('a growing conversation, turn after turn', () => {
  it('summarises once, then reuses the summary with byte-identical prefixes (reactive: proactive off)', async () => {
    provider = await startStandIn({ limitBytes: LIMIT, tooLong: 'stated' });
    gateway = await startGateway({
      upstream: { url: provider.baseUrl },
      summarizer: { maxInputTokens: 500_000 },
      // Masking off: the summary is what is remembered.
      compaction: { proactive: false, mask: false },
    });
    // conversations only grow: each turn's history starts with the previous one
    expect(JSON.stringify(request(31).messages).startsWith(JSON.stringify(request(30).messages).slice(0, -1))).toBe(true);

    let n = 10;
    while (JSON.stringify(request(n)).length <= LIMIT) {
      const quiet = await turn(n);
      expect(quiet.header).toBeNull();
      expect(quiet.chatCalls).toHaveLength(1);
      n++;
    }

    // One summarization a turn at most; the summarizer (the upstream's own model) is called in
    // chunks sized to the window the refusal stated, so one or more calls.
    const first = await turn(n);
    expect(first.header).toMatchObject({ outcome: 'replayed', memory: 'miss', strategy: 'summarize' });
    expect(first.chatCalls).toHaveLength(2);
    expect(first.summarizerCalls.length).toBeGreaterThanOrEqual(1);
    expectValidReplay(first.chatCalls[0], first.chatCalls[1]);
    let prefix = summaryPrefix(first.chatCalls[1].body);
    let summarising = 1;

    const reused: number[] = [];
    for (let next = n + 1; next <= n + 12; next++) {
      const t = await turn(next);
      expect(t.header?.outcome).toBe('replayed');
      expect(t.header?.memory).toBe('hit');
      expect(t.chatCalls).toHaveLength(2);
      expectValidReplay(t.chatCalls[0], t.chatCalls[1]);
      if (t.summarizerCalls.length === 0) {
        // The provider's prompt cache sees the very same bytes up to and including the summary.
        expect(summaryPrefix(t.chatCalls[1].body)).toBe(prefix);
        expect(t.chatCalls[1].body.toString().startsWith(prefix)).toBe(true);
        reused.push(next);
      } else {
        // Grown past the target: the summarizer reads its earlier summary and only the newly
        // old messages, never the messages it already condensed.
        summarising++;
        const input = t.summarizerCalls.map((c) => String(c.json.messages.at(-1).content)).join('\n');
        expect(input).toContain('[summary of the earlier conversation]');
        expect(input).toContain('SUMMARY of');
        const firstSpanText = String(request(n).messages[3].content ?? '').slice(0, 60);
        expect(firstSpanText.length).toBeGreaterThan(20);
        expect(input).not.toContain(firstSpanText);
        // the new summary is the prefix later turns must repeat
        prefix = summaryPrefix(t.chatCalls[1].body);
      }
    }
    expect(reused.length).toBeGreaterThanOrEqual(3);
    expect(summarising).toBeLessThan(1 + 12 / 2);

    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    expect(metrics).toMatch(/gateway_memory_lookups_total\{result="hit"\} 12/);
    expect(metrics).toMatch(/gateway_memory_lookups_total\{result="miss"\} 1/);
    expect(metrics).toMatch(/gateway_memory_summarizer_calls_saved_total [1-9]/);
  });

  it('masks once, then reuses the masked outputs with byte-identical prefixes, masking more only when grown past the target (reactive)', async () => {
    provider = await startStandIn({ limitBytes: LIMIT, tooLong: 'stated' });
    gateway = await startGateway({
      upstream: { url: provider.baseUrl },
      summarizer: { maxInputTokens: 500_000 },
      compaction: { proactive: false },
    });
    const n = overflowAt();
    const first = await turn(n);
    expect(first.header).toMatchObject({ outcome: 'replayed', memory: 'miss', strategy: 'mask' });
    expect(first.chatCalls).toHaveLength(2);
    expectValidReplay(first.chatCalls[0], first.chatCalls[1]);
    let prefix = maskedPrefix(first.chatCalls[1].body);
    let masked = maskedCount(first.chatCalls[1].body);

    const reused: number[] = [];
    const extended: number[] = [];
    for (let next = n + 1; next <= n + 12; next++) {
      const t = await turn(next);
      expect(t.header).toMatchObject({ outcome: 'replayed', memory: 'hit', strategy: 'mask' });
      expect(t.chatCalls).toHaveLength(2);
      expect(t.summarizerCalls).toEqual([]);
      expectValidReplay(t.chatCalls[0], t.chatCalls[1]);
      const now = maskedCount(t.chatCalls[1].body);
      if (now === masked) {
        // The provider's prompt cache sees the very same bytes up to and including the last mask.
        expect(maskedPrefix(t.chatCalls[1].body)).toBe(prefix);
        reused.push(next);
      } else {
        // Grown past the target: older outputs masked too, the earlier masks kept as they were.
        expect(now).toBeGreaterThan(masked);
        const earlier = prefix.slice(0, prefix.lastIndexOf(MASKED));
        expect(t.chatCalls[1].body.toString().startsWith(earlier)).toBe(true);
        extended.push(next);
        prefix = maskedPrefix(t.chatCalls[1].body);
        masked = now;
      }
    }
    expect(reused.length).toBeGreaterThanOrEqual(3);
    expect(extended.length).toBeLessThan(12 / 2);

    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    expect(metrics).toMatch(/gateway_memory_lookups_total\{result="hit"\} 12/);
    expect(metrics).toMatch(/gateway_memory_lookups_total\{result="miss"\} 1/);
    expect(total(metrics, 'gateway_summarizer_calls_total')).toBe(0);
    expect(metrics).toContain(`gateway_compactions_total{api="chat",strategy="mask",outcome="replayed",upstream="default"} 13\n`);
  });

  it('with memory off, every overflowing turn is summarised from scratch', async () => {
    provider = await startStandIn({ limitBytes: LIMIT, tooLong: 'stated' });
    // Masking off: the summarizer condenses.
    gateway = await startGateway({
      upstream: { url: provider.baseUrl },
      summarizer: { maxInputTokens: 500_000 },
      memory: { enabled: false },
      compaction: { mask: false },
    });
    const n = overflowAt();
    for (let next = n; next < n + 4; next++) {
      const t = await turn(next);
      expect(t.summarizerCalls.length).toBeGreaterThanOrEqual(1);
      expect(t.header).toMatchObject({ memory: 'miss', strategy: 'summarize' });
    }
  });

  it('proactive mode sends the compacted request first: one upstream call per turn', async () => {
    provider = await startStandIn({ limitBytes: LIMIT, tooLong: 'stated' });
    gateway = await startGateway({
      upstream: { url: provider.baseUrl },
      summarizer: { maxInputTokens: 500_000 },
      compaction: { proactive: true },
    });
    const n = overflowAt();
    const first = await turn(n);
    expect(first.header).toMatchObject({ outcome: 'replayed', trigger: 'rejected' });
    expect(first.chatCalls).toHaveLength(2);
    for (let next = n + 1; next <= n + 6; next++) {
      const t = await turn(next);
      expect(t.chatCalls).toHaveLength(1);
      expect(t.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive', memory: 'hit' });
      expect(t.chatCalls[0].body.length).toBeLessThanOrEqual(LIMIT);
      expect(t.chatCalls[0].headers['x-gateway-compaction']).toMatch(/trigger=proactive/);
      const original = Buffer.from(JSON.stringify(request(next)));
      expectValidReplay({ ...t.chatCalls[0], json: request(next), body: original }, t.chatCalls[0], /outcome=compacted, trigger=proactive/);
    }
    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    expect(metrics).toMatch(/gateway_proactive_compactions_total 6/);
  });

  it('a learned limit informs the target but never compacts a fresh conversation on its own', async () => {
    provider = await startStandIn({ limitBytes: LIMIT, tooLong: 'stated' });
    gateway = await startGateway({
      upstream: { url: provider.baseUrl },
      summarizer: { maxInputTokens: 500_000 },
      auth: { metricsModelNames: true },
    });
    const n = overflowAt();
    await turn(n + 5); // rejected once: the error stated the window (15,000 tokens)
    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    expect(metrics).toMatch(/gateway_learned_context_limit_tokens\{model="fake-model"\} 15000/);

    // Another conversation (another task, another seed): nothing remembered, so it goes as sent.
    const before = provider.calls('chat').length;
    const fresh = { model: 'fake-model', messages: agentConversation({ turns: n + 8, toolOutputBytes: 1_500, seed: 7, imageBytes: 0 }) };
    expect(JSON.stringify(fresh).length).toBeGreaterThan(LIMIT);
    const res = await postChat(gateway, fresh, { authorization: 'Bearer sk-tenant-a' });
    expect(res.status).toBe(200);
    const calls = provider.calls('chat').slice(before);
    expect(calls).toHaveLength(2);
    expect(calls[0].body.toString()).toBe(JSON.stringify(fresh));
    expect(calls[0].headers['x-gateway-compaction']).toBeUndefined();
    expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({
      outcome: 'replayed',
      trigger: 'rejected',
      memory: 'miss',
    });
  });
});

describe('tenants', () => {
  it.each([
    ['a summary', { mask: false }, 'summarize'],
    ['a masked span', {}, 'mask'],
  ] as const)('two clients with different keys and identical histories never share %s', async (_what, compaction, strategy) => {
    provider = await startStandIn({ limitBytes: LIMIT, tooLong: 'stated' });
    gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { maxInputTokens: 500_000 }, compaction });
    const n = overflowAt();
    const a = await turn(n, { authorization: 'Bearer sk-tenant-a' });
    expect(a.header).toMatchObject({ memory: 'miss', strategy });
    const b = await turn(n + 1, { authorization: 'Bearer sk-tenant-b' });
    // b compacts its own history: its own summarizer call, or its own masks
    expect(b.header).toMatchObject({ memory: 'miss', strategy });
    if (strategy === 'summarize') expect(b.summarizerCalls.length).toBeGreaterThanOrEqual(1);
    else expect(b.summarizerCalls).toEqual([]);
    // and each tenant's own next turn does reuse its own
    const a2 = await turn(n + 2, { authorization: 'Bearer sk-tenant-a' });
    expect(a2.header?.memory).toBe('hit');
    const b2 = await turn(n + 2, { authorization: 'Bearer sk-tenant-b' });
    expect(b2.header?.memory).toBe('hit');
    // the key itself is never what is stored or logged
    expect(gateway.logText()).not.toContain('sk-tenant-a');
  });
});
