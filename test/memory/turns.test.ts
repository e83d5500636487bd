import { afterEach, describe, expect, it } from 'vitest';
import { agentConversation } from '../compaction/conversations.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startProvider, type FakeProvider } from '../helpers/provider.js';
import { expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';
import { LIMIT, firstOverflow, sessionRequest } from './session.js';

let provider: FakeProvider;
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

async function turn(n: number, headers: Record<string, string> = {}) {
  const before = { chat: provider.chatCalls().length, summarizer: provider.summarizerCalls().length };
  const res = await postChat(gateway, request(n), { authorization: 'Bearer sk-tenant-a', ...headers });
  expect(res.status).toBe(200);
  const header = res.headers.get('x-gateway-compaction');
  return {
    header: header ? parseCompactionHeader(header) : null,
    chatCalls: provider.chatCalls().slice(before.chat),
    summarizerCalls: provider.summarizerCalls().slice(before.summarizer),
  };
}

describe('a growing conversation, turn after turn', () => {
  it('summarises once, then reuses the summary with byte-identical prefixes (reactive: proactive off)', async () => {
    provider = await startProvider({ limitBytes: LIMIT, style: 'openai_400' });
    gateway = await startGateway({
      upstream: { url: provider.baseUrl },
      summarizer: { maxInputTokens: 500_000 },
      compaction: { proactive: false },
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

    const first = await turn(n);
    expect(first.header).toMatchObject({ outcome: 'replayed', memory: 'miss', strategy: 'summarize' });
    expect(first.chatCalls).toHaveLength(2);
    expect(first.summarizerCalls).toHaveLength(1);
    expectValidReplay(first.chatCalls[0], first.chatCalls[1]);
    let prefix = summaryPrefix(first.chatCalls[1].body);

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
        expect(t.summarizerCalls).toHaveLength(1);
        const input = String(t.summarizerCalls[0].json.messages.at(-1).content);
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
    expect(provider.summarizerCalls().length).toBeLessThan(1 + 12 / 2);

    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    expect(metrics).toMatch(/gateway_memory_lookups_total\{result="hit"\} 12/);
    expect(metrics).toMatch(/gateway_memory_lookups_total\{result="miss"\} 1/);
    expect(metrics).toMatch(/gateway_memory_summarizer_calls_saved_total [1-9]/);
  });

  it('with memory off, every overflowing turn is summarised from scratch', async () => {
    provider = await startProvider({ limitBytes: LIMIT, style: 'openai_400' });
    gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { maxInputTokens: 500_000 }, memory: { enabled: false } });
    const n = overflowAt();
    for (let next = n; next < n + 4; next++) {
      const t = await turn(next);
      expect(t.summarizerCalls).toHaveLength(1);
      expect(t.header?.memory).toBe('miss');
    }
  });

  it('proactive mode sends the compacted request first: one upstream call per turn', async () => {
    provider = await startProvider({ limitBytes: LIMIT, style: 'openai_400' });
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
    provider = await startProvider({ limitBytes: LIMIT, style: 'openai_400' });
    gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
    const n = overflowAt();
    await turn(n + 5); // rejected once: the error stated the window (15,000 tokens)
    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    expect(metrics).toMatch(/gateway_learned_context_limit_tokens\{model="fake-model"\} 15000/);

    // Another conversation (another task, another seed): nothing remembered, so it goes as sent.
    const before = provider.chatCalls().length;
    const fresh = { model: 'fake-model', messages: agentConversation({ turns: n + 8, toolOutputBytes: 1_500, seed: 7, imageBytes: 0 }) };
    expect(JSON.stringify(fresh).length).toBeGreaterThan(LIMIT);
    const res = await postChat(gateway, fresh, { authorization: 'Bearer sk-tenant-a' });
    expect(res.status).toBe(200);
    const calls = provider.chatCalls().slice(before);
    expect(calls).toHaveLength(2);
    expect(calls[0].body.toString()).toBe(JSON.stringify(fresh));
    expect(calls[0].headers['x-gateway-compaction']).toBeUndefined();
    expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed', trigger: 'rejected', memory: 'miss' });
  });
});

describe('tenants', () => {
  it('two clients with different keys and identical histories never share a summary', async () => {
    provider = await startProvider({ limitBytes: LIMIT, style: 'openai_400' });
    gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
    const n = overflowAt();
    const a = await turn(n, { authorization: 'Bearer sk-tenant-a' });
    expect(a.header?.memory).toBe('miss');
    const b = await turn(n + 1, { authorization: 'Bearer sk-tenant-b' });
    expect(b.header?.memory).toBe('miss');
    expect(b.summarizerCalls).toHaveLength(1);
    // and each tenant's own next turn does reuse its own
    const a2 = await turn(n + 2, { authorization: 'Bearer sk-tenant-a' });
    expect(a2.header?.memory).toBe('hit');
    const b2 = await turn(n + 2, { authorization: 'Bearer sk-tenant-b' });
    expect(b2.header?.memory).toBe('hit');
    // the key itself is never what is stored or logged
    expect(gateway.logText()).not.toContain('sk-tenant-a');
  });
});
