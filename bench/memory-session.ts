/**
 * A scripted 50-turn agent session against a provider with a fixed window, run three ways:
 * without compaction memory, with it (reactive), and with it in proactive mode. Counts what each
 * costs: upstream calls and bytes, summarizer calls and the bytes they read. Loopback only.
 */
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { validateConfig } from '../src/config/load.js';
import type { ConfigInput } from '../src/config/schema.js';
import { buildServer } from '../src/server.js';
import { agentConversation } from '../test/compaction/conversations.js';
import { completion, type Received } from '../test/helpers/fake-upstream.js';
import { startStandIn } from '../test/helpers/provider.js';

export interface SessionCost {
  mode: string;
  turns: number;
  failedTurns: number;
  upstreamCalls: number;
  upstreamBytes: number;
  summarizerCalls: number;
  summarizerBytes: number;
  seconds: number;
}

const LIMIT_BYTES = 120_000;
const TURNS = 50;
/** A summarizer that takes a realistic moment per call, so saved calls show as saved time. */
const SUMMARIZER_DELAY_MS = 40;

/** The tests' stand-in (strict chat rules, bytes / 4 as tokens), which also plays the summarizer. */
async function startProvider() {
  const standIn = await startStandIn({
    limitBytes: LIMIT_BYTES,
    tooLong: 'stated',
    reply: () => ({ text: 'ok' }),
    summarizer: async (req) => {
      await new Promise((r) => setTimeout(r, SUMMARIZER_DELAY_MS));
      return {
        status: 200,
        json: completion(`Summary of ${req.body.length} bytes: goals, files, decisions, pending work.`, 'chatcmpl-bench-summary'),
      };
    },
  });
  const bytes = (calls: Received[]) => calls.reduce((sum, r) => sum + r.body.length, 0);
  const cost = () => ({
    upstreamCalls: standIn.calls('chat').length,
    upstreamBytes: bytes(standIn.calls('chat')),
    summarizerCalls: standIn.summarizerCalls().length,
    summarizerBytes: bytes(standIn.summarizerCalls()),
  });
  return { url: standIn.baseUrl, cost, close: standIn.close };
}

export async function runSession(mode: string, config: Omit<ConfigInput, 'upstream'>): Promise<SessionCost> {
  const provider = await startProvider();
  const sink = new Writable({ write: (_c, _e, done) => done() });
  const app = buildServer(validateConfig({ ...config, upstream: { url: provider.url }, log: { level: 'warn' } }), { logStream: sink });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/chat/completions`;
  const started = performance.now();
  let failedTurns = 0;
  // The agent's history only grows: each turn adds a round of tool calls and their results.
  for (let turn = 1; turn <= TURNS; turn++) {
    const body = JSON.stringify({
      model: 'bench-model',
      messages: agentConversation({ turns: 10 + turn * 2, toolOutputBytes: 2_000, seed: 11, imageBytes: 0 }),
      max_tokens: 1_000,
    });
    const res = await fetch(base, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' },
      body,
    });
    await res.arrayBuffer();
    if (res.status !== 200) failedTurns++;
  }
  const seconds = (performance.now() - started) / 1000;
  await app.close();
  await provider.close();
  return { mode, turns: TURNS, failedTurns, ...provider.cost(), seconds };
}

export async function runMemorySessions(): Promise<SessionCost[]> {
  const summarizer = { maxInputTokens: 500_000 };
  return [
    await runSession('no memory', { summarizer, memory: { enabled: false } }),
    await runSession('memory (reactive)', { summarizer }),
    await runSession('memory + proactive', { summarizer, compaction: { proactive: true } }),
  ];
}

export function renderSessions(rows: SessionCost[]): string {
  const base = rows[0];
  const pct = (a: number, b: number) => {
    if (b === 0) return '-';
    const saved = Math.round((1 - a / b) * 100);
    return saved >= 0 ? `${saved}% saved` : `${-saved}% more`;
  };
  const lines = [
    `| mode | turns failed | upstream calls | upstream MB sent | summarizer calls | summarizer MB read | wall time (s) |`,
    `|---|---|---|---|---|---|---|`,
    ...rows.map(
      (r) =>
        `| ${r.mode} | ${r.failedTurns}/${r.turns} | ${r.upstreamCalls}${r === base ? '' : ` (${pct(r.upstreamCalls, base.upstreamCalls)})`} | ${(r.upstreamBytes / 1e6).toFixed(2)}${r === base ? '' : ` (${pct(r.upstreamBytes, base.upstreamBytes)})`} | ${r.summarizerCalls}${r === base ? '' : ` (${pct(r.summarizerCalls, base.summarizerCalls)})`} | ${(r.summarizerBytes / 1e6).toFixed(2)} | ${r.seconds.toFixed(2)} |`,
    ),
  ];
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = await runMemorySessions();
  process.stdout.write(`${renderSessions(rows)}\n`);
}
