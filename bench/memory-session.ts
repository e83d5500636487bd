/**
 * A scripted 50-turn agent session against a provider with a fixed window, run three ways:
 * without compaction memory, with it (reactive), and with it in proactive mode. Counts what each
 * costs: upstream calls and bytes, summarizer calls and the bytes they read. Loopback only.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { validateConfig } from '../src/config/load.js';
import type { ConfigInput } from '../src/config/schema.js';
import { buildServer } from '../src/server.js';
import { agentConversation } from '../test/compaction/conversations.js';

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

async function read(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function startProvider() {
  const cost = { upstreamCalls: 0, upstreamBytes: 0, summarizerCalls: 0, summarizerBytes: 0 };
  const server = createServer(async (req, res) => {
    const body = await read(req);
    const send = (status: number, json: unknown) => {
      const text = JSON.stringify(json);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    if (req.headers['x-gateway-compaction'] === 'summarizer') {
      cost.summarizerCalls++;
      cost.summarizerBytes += body.length;
      await new Promise((r) => setTimeout(r, SUMMARIZER_DELAY_MS));
      return send(200, { choices: [{ message: { role: 'assistant', content: `Summary of ${body.length} bytes: goals, files, decisions, pending work.` } }] });
    }
    cost.upstreamCalls++;
    cost.upstreamBytes += body.length;
    if (body.length > LIMIT_BYTES) {
      const tokens = Math.ceil(body.length / 4);
      return send(400, {
        error: {
          message: `This model's maximum context length is ${LIMIT_BYTES / 4} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
          type: 'invalid_request_error',
          code: 'context_length_exceeded',
        },
      });
    }
    return send(200, { id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return { url, cost, close: () => new Promise<void>((r) => server.close(() => r())) };
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
    const res = await fetch(base, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' }, body });
    await res.arrayBuffer();
    if (res.status !== 200) failedTurns++;
  }
  const seconds = (performance.now() - started) / 1000;
  await app.close();
  await provider.close();
  return { mode, turns: TURNS, failedTurns, ...provider.cost, seconds };
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
