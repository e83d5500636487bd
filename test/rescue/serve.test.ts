import { Writable } from 'node:stream';
import pino from 'pino';
import { Agent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { chat } from '../../src/dialects/chat.js';
import { responses } from '../../src/dialects/responses.js';
import type { Dialect } from '../../src/dialects/types.js';
import { tenantOf } from '../../src/memory/fingerprint.js';
import { createMemory, type CompactionMemory } from '../../src/memory/index.js';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.js';
import type { RescueContext } from '../../src/rescue/context.js';
import { serve, type Outcome } from '../../src/rescue/index.js';
import { readIncoming } from '../../src/rescue/request.js';
import { ClientGone } from '../../src/upstream/client-gone.js';
import { completion, json, startFakeUpstream, type FakeUpstream, type Handler } from '../helpers/fake-upstream.js';
import { rescueContext } from '../helpers/rescue-context.js';
import { isSummarizer, parseCompactionHeader, toolTurnsBody } from '../helpers/rescue.js';

/*
 * The rescue core driven directly, as a route drives it, against a fake upstream on a loopback
 * socket: each way a rejection ends (clamp, compaction, truncation, pass-through, a failed
 * replay), what goes upstream, what the client is told, and what the operator sees.
 */

let upstream: FakeUpstream;
const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
  await upstream?.close();
});

const calls = () => upstream.received.filter((r) => !isSummarizer(r));
const summarizerCalls = () => upstream.received.filter(isSummarizer);

/** A coding agent's request: system prompt, task, `turns` tool calls with 2 KB outputs, a last question. */
function agentBody(turns: number, extra: Record<string, unknown> = {}) {
  return toolTurnsBody(turns, (t) => `// file ${t}\n${'const x = 1;\n'.repeat(160)}`, extra);
}

const tooLong = (limit: number, tokens: number) => ({
  error: {
    message: `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
    type: 'invalid_request_error',
    param: 'messages',
    code: 'context_length_exceeded',
  },
});

/** Rejects bodies over `limitBytes` as a context overflow; the summarizer answers with a summary. */
function provider(limitBytes: number, over: Partial<{ replay: Handler; summarizer: Handler }> = {}): Handler {
  return (req, res, raw) => {
    if (isSummarizer(req))
      return over.summarizer ? over.summarizer(req, res, raw) : json(res, 200, completion('SUMMARY: the build was fixed in f3.'));
    if (calls().length > 1 && over.replay) return over.replay(req, res, raw);
    if (req.body.length > limitBytes) return json(res, 400, tooLong(Math.floor(limitBytes / 4), Math.ceil(req.body.length / 4)));
    return json(res, 200, completion('rescued'));
  };
}

interface Run {
  outcome: Outcome;
  status: number;
  header: Record<string, string | number> | undefined;
  text: string;
  logs: any[];
  metrics: Metrics;
  ctx: RescueContext;
}

async function run(
  body: unknown,
  o: {
    config?: ConfigInput;
    dialect?: Dialect;
    headers?: Record<string, string>;
    clientHeaders?: Record<string, string>;
    committed?: boolean;
    memory?: CompactionMemory | null;
    encoding?: string;
    raw?: Buffer;
    path?: string;
    gone?: ClientGone;
  } = {},
): Promise<Run> {
  const config = validateConfig({
    upstream: { url: upstream.baseUrl },
    summarizer: { maxInputTokens: 500_000 },
    memory: { enabled: false },
    ...o.config,
  });
  const lines: string[] = [];
  const log = pino({ level: 'debug' }, new Writable({ write: (c, _e, done) => (lines.push(c.toString()), done()) }));
  const metrics = createMetrics();
  const dispatcher = new Agent();
  agents.push(dispatcher);
  const raw = o.raw ?? Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const dialect = o.dialect ?? chat;
  const ctx = rescueContext({
    config,
    dispatcher,
    metrics,
    memory: o.memory,
    dialect,
    path: o.path ?? (dialect === chat ? '/chat/completions' : '/responses'),
    incoming: readIncoming(raw, o.encoding),
    headers: { authorization: 'Bearer sk-client', ...o.headers },
    clientHeaders: o.clientHeaders,
    log,
    gone: o.gone,
  });
  const outcome = await serve(ctx, () => o.committed ?? false);
  const chunks: Buffer[] = [];
  for await (const chunk of outcome.answer.response.body) chunks.push(Buffer.from(chunk));
  const text = Buffer.concat([outcome.answer.held.bytes, ...chunks]).toString();
  return {
    outcome,
    status: outcome.answer.response.status,
    header: outcome.header ? parseCompactionHeader(outcome.header) : undefined,
    text,
    logs: lines.map((l) => JSON.parse(l)),
    metrics,
    ctx,
  };
}

/** The summarizer's tests: masking off, so the compaction asks it. */
const NO_MASK = { compaction: { mask: false } } satisfies ConfigInput;

async function count(metrics: Metrics, name: string, labels: Record<string, string>): Promise<number> {
  const { values } = await metrics.registry.getSingleMetric(name)!.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, l]) => (v.labels as Record<string, unknown>)[k] === l))
    .reduce((s, v) => s + v.value, 0);
}

describe('a request the upstream takes', () => {
  it('goes once, as sent, with no header and no decision logged', async () => {
    upstream = await startFakeUpstream(provider(1_000_000));
    const body = agentBody(3);
    const r = await run(body);
    expect(r.status).toBe(200);
    expect(r.header).toBeUndefined();
    expect(calls()).toHaveLength(1);
    expect(calls()[0].body.toString()).toBe(JSON.stringify(body));
    expect(calls()[0].headers['x-gateway-compaction']).toBeUndefined();
    expect(r.logs.filter((l) => l.level >= 40)).toEqual([]);
    expect(r.ctx.notes).toMatchObject({ upstreamStatus: 200, streamed: false });
    expect(r.ctx.notes.compaction).toBeUndefined();
  });

  it('an overlong rejection after the client got bytes is relayed as it is', async () => {
    upstream = await startFakeUpstream(provider(10_000));
    const r = await run(agentBody(20), { committed: true });
    expect(r.status).toBe(400);
    expect(r.header).toBeUndefined();
    expect(calls()).toHaveLength(1);
  });
});

describe('compaction and one replay', () => {
  it('summarizes with the request’s own credentials, replays marked, and reports it', async () => {
    upstream = await startFakeUpstream(provider(20_000));
    const body = agentBody(20);
    const r = await run(body, { config: NO_MASK, headers: { 'x-api-key': 'k2', 'api-key': ['a', 'b'] as never } });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).choices[0].message.content).toBe('rescued');
    expect(calls()).toHaveLength(2);
    const [first, replay] = calls();
    expect(first.body.toString()).toBe(JSON.stringify(body));
    expect(replay.body.length).toBeLessThan(20_000);
    expect(replay.json.messages[0]).toEqual(body.messages[0]);
    expect(replay.json.messages.at(-1)).toEqual(body.messages.at(-1));
    const summary = replay.json.messages.find((m: any) => typeof m.content === 'string' && m.content.startsWith('[compaction-gateway]'));
    expect(summary.content).toContain("because the request exceeded the model's context window");
    expect(summary.content).toContain('SUMMARY: the build was fixed in f3.');
    expect(parseCompactionHeader(replay.headers['x-gateway-compaction'] as string)).toMatchObject({
      outcome: 'replayed',
      reason: 'context_length',
      strategy: 'summarize',
    });
    expect(r.header).toMatchObject({
      outcome: 'replayed',
      trigger: 'rejected',
      reason: 'context_length',
      strategy: 'summarize',
      memory: 'miss',
      'replay-status': 200,
    });
    expect(r.ctx.notes.compaction).toBe(r.outcome.header);

    // The summarizer is the upstream's own model: its calls are sized to the window the refusal
    // stated (5,000 tokens), one or more, each with the request's own credentials.
    const n = summarizerCalls().length;
    expect(n).toBeGreaterThanOrEqual(1);
    for (const s of summarizerCalls()) {
      expect(s.url).toBe('/v1/chat/completions');
      expect(s.json.model).toBe('fake-model');
      expect(s.headers.authorization).toBe('Bearer sk-client');
      expect(s.headers['x-api-key']).toBe('k2');
      expect(s.headers['api-key']).toBeUndefined();
      expect(s.body.length).toBeLessThan(20_000);
    }

    const start = r.logs.find((l) => /^summarizing/.test(l.msg));
    expect(start).toMatchObject({ level: 30, api: 'chat', items: expect.any(Number) });
    expect(start.msg).toBe(`summarizing ${start.items} items for a compaction`);
    expect(start.items).toBeGreaterThan(20);
    expect(
      r.logs.some(
        (l) => l.level === 30 && new RegExp(`^summary ready in \\d+ ms \\(${n} summarizer call${n === 1 ? '' : 's'}\\)$`).test(l.msg),
      ),
    ).toBe(true);
    const end = r.logs.find((l) => /^summary ready/.test(l.msg));
    expect(end).toMatchObject({ api: 'chat', calls: n });
    const warn = r.logs.filter((l) => l.level === 40);
    expect(warn).toHaveLength(1);
    expect(warn[0].msg).toMatch(
      /^upstream rejected the chat request as overlong \(400 context_length, limit stated\): compacted \d+ items into \d+ .*, replayed once: the upstream answered 200$/,
    );

    expect(await count(r.metrics, 'gateway_overlong_rejections_total', { api: 'chat', reason: 'context_length' })).toBe(1);
    expect(await count(r.metrics, 'gateway_compactions_total', { api: 'chat', strategy: 'summarize', outcome: 'replayed' })).toBe(1);
    expect(await count(r.metrics, 'gateway_replays_total', { api: 'chat', result: 'success' })).toBe(1);
  });

  it('the log names the remedy, and the duration counted lies within the call', async () => {
    upstream = await startFakeUpstream(provider(20_000));
    const before = performance.now();
    const r = await run(agentBody(20));
    const elapsedSeconds = (performance.now() - before) / 1000;
    const warn = r.logs.find((l) => l.level === 40);
    expect(warn.compaction).toMatchObject({ remedy: 'compaction', outcome: 'replayed', strategy: 'mask' });
    expect(warn.compaction.durationMs).toBeGreaterThanOrEqual(0);
    expect(warn.compaction.durationMs).toBeLessThanOrEqual(elapsedSeconds * 1000 + 1);
    const { values } = await r.metrics.registry.getSingleMetric('gateway_compaction_duration_seconds')!.get();
    const sum = values.find((v) => (v as { metricName?: string }).metricName === 'gateway_compaction_duration_seconds_sum')!.value;
    expect(sum).toBeLessThanOrEqual(elapsedSeconds);
  });

  it('a long transcript takes several summarizer calls, and says so', async () => {
    upstream = await startFakeUpstream(provider(20_000));
    // (Under the cost cap: at this tiny window the middle is some twenty calls.)
    const r = await run(agentBody(20), { config: { summarizer: { maxInputTokens: 4_000, maxCalls: 100 }, ...NO_MASK } });
    expect(r.status).toBe(200);
    const n = summarizerCalls().length;
    expect(n).toBeGreaterThan(1);
    expect(r.logs.some((l) => l.level === 30 && new RegExp(`^summary ready in \\d+ ms \\(${n} summarizer calls\\)$`).test(l.msg))).toBe(
      true,
    );
  });

  it('a request that names no model asks the summarizer with an empty model', async () => {
    upstream = await startFakeUpstream(provider(20_000));
    const { model: _m, ...body } = agentBody(20);
    const r = await run(body, { config: NO_MASK });
    expect(r.status).toBe(200);
    expect(summarizerCalls()[0].json.model).toBe('');
  });

  it('a 413 is summarised as a size limit, and a summarizer that fails falls back, logged as such', async () => {
    upstream = await startFakeUpstream((req, res) => {
      if (isSummarizer(req)) return json(res, 500, { error: { message: 'down' } });
      if (req.body.length > 20_000)
        return json(res, 413, { error: { type: 'request_too_large', message: 'Request exceeds the maximum size' } });
      return json(res, 200, completion('rescued'));
    });
    const r = await run(agentBody(20), { config: NO_MASK });
    expect(r.status).toBe(200);
    expect(r.header).toMatchObject({ reason: 'body_too_large', strategy: 'fallback' });
    const summary = calls()[1].json.messages.find(
      (m: any) => typeof m.content === 'string' && m.content.startsWith('[compaction-gateway]'),
    );
    expect(summary.content).toContain("because the request exceeded the upstream's size limit");
    const failed = r.logs.find((l) => /^summarizer failed/.test(l.msg));
    expect(failed.level).toBe(40);
    expect(failed.msg).toMatch(/^summarizer failed \(\w+\) after \d+ ms; using the deterministic digest$/);
    expect(failed).toMatchObject({ api: 'chat', failure: expect.any(String) });
  });

  it('the configured summarizer: its URL, model, API and key, not the client’s', async () => {
    const other = await startFakeUpstream((_req, res) => json(res, 200, { output_text: 'SUMMARY from elsewhere' }));
    try {
      upstream = await startFakeUpstream(provider(20_000));
      const r = await run(agentBody(20), {
        config: {
          summarizer: { url: other.baseUrl, model: 'small', api: 'responses', apiKey: 'sk-summ', maxInputTokens: 500_000 },
          ...NO_MASK,
        },
      });
      expect(r.status).toBe(200);
      expect(summarizerCalls()).toHaveLength(0);
      const [s] = other.received;
      expect(s.url).toBe('/v1/responses');
      expect(s.json.model).toBe('small');
      expect(s.headers.authorization).toBe('Bearer sk-summ');
      expect(JSON.stringify(calls()[1].json)).toContain('SUMMARY from elsewhere');
    } finally {
      await other.close();
    }
  });

  it('an Anthropic summarizer key goes as x-api-key', async () => {
    const other = await startFakeUpstream((_req, res) => json(res, 200, completion('SUMMARY anthropic-side')));
    try {
      upstream = await startFakeUpstream(provider(20_000));
      await run(agentBody(20), {
        config: { summarizer: { url: other.baseUrl, api: 'messages', apiKey: 'sk-ant', maxInputTokens: 500_000 }, ...NO_MASK },
      });
      const [s] = other.received;
      expect(s.headers['x-api-key']).toBe('sk-ant');
      expect(s.headers.authorization).toBeUndefined();
    } finally {
      await other.close();
    }
  });

  it('a compaction that cannot help passes the rejection through, counted as not shrunk', async () => {
    upstream = await startFakeUpstream(provider(100));
    const body = {
      model: 'fake-model',
      messages: [
        { role: 'system', content: 'x'.repeat(5000) },
        { role: 'user', content: 'hi' },
      ],
    };
    const r = await run(body);
    expect(r.status).toBe(400);
    expect(calls()).toHaveLength(1);
    expect(r.header).toMatchObject({ outcome: 'not_shrunk', reason: 'context_length' });
    expect(await count(r.metrics, 'gateway_compactions_total', { api: 'chat', strategy: 'none', outcome: 'not_shrunk' })).toBe(1);
    expect(await count(r.metrics, 'gateway_replays_total', {})).toBe(0);
  });
});

describe('the replay’s answer', () => {
  it('still overlong, or another error: relayed, counted, the status in the header', async () => {
    upstream = await startFakeUpstream(provider(20_000, { replay: (_q, res) => json(res, 400, tooLong(10, 20)) }));
    const still = await run(agentBody(20));
    expect(still.status).toBe(400);
    expect(still.header).toMatchObject({ outcome: 'replay_failed', 'replay-status': 400 });
    expect(await count(still.metrics, 'gateway_replays_total', { api: 'chat', result: 'still_overlong' })).toBe(1);
    await upstream.close();

    upstream = await startFakeUpstream(provider(20_000, { replay: (_q, res) => json(res, 503, { error: { message: 'busy' } }) }));
    const busy = await run(agentBody(20));
    expect(busy.status).toBe(503);
    expect(busy.header).toMatchObject({ outcome: 'replay_failed', 'replay-status': 503 });
    expect(await count(busy.metrics, 'gateway_replays_total', { api: 'chat', result: 'upstream_error' })).toBe(1);
    expect(busy.header).toMatchObject({ strategy: 'mask' });
    expect(await count(busy.metrics, 'gateway_compactions_total', { api: 'chat', strategy: 'mask', outcome: 'replay_failed' })).toBe(1);
  });

  it('a replay refused with a 400 that is not about length is an upstream error', async () => {
    upstream = await startFakeUpstream(
      provider(20_000, {
        replay: (_q, res) =>
          json(res, 400, { error: { message: 'Invalid value for temperature', type: 'invalid_request_error', code: 'invalid_value' } }),
      }),
    );
    const r = await run(agentBody(20));
    expect(r.status).toBe(400);
    expect(r.header).toMatchObject({ outcome: 'replay_failed', 'replay-status': 400 });
    expect(await count(r.metrics, 'gateway_replays_total', { api: 'chat', result: 'upstream_error' })).toBe(1);
  });

  it('no answer at all: the upstream’s own rejection goes to the client, and the rescue’s one line is an ERROR saying so', async () => {
    upstream = await startFakeUpstream(provider(20_000, { replay: (_q, res) => void res.socket!.destroy() }));
    const r = await run(agentBody(20));
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error.code).toBe('context_length_exceeded');
    expect(r.header).toMatchObject({ outcome: 'replay_failed' });
    expect(r.header).not.toHaveProperty('replay-status');
    expect(await count(r.metrics, 'gateway_replays_total', { api: 'chat', result: 'failed' })).toBe(1);
    const loud = r.logs.filter((l) => l.level >= 40);
    expect(loud).toHaveLength(1);
    expect(loud[0]).toMatchObject({
      level: 50,
      compaction: { outcome: 'replay_failed', replayResult: 'failed', replayError: expect.any(String) },
    });
    expect(loud[0].msg).toMatch(/, replayed once, which failed before the upstream answered \(.+\); the client gets an error$/);
  });

  it('no answer after the client left: the failure is thrown, not hidden behind the first answer', async () => {
    const gone = new ClientGone();
    upstream = await startFakeUpstream(
      provider(20_000, {
        replay: (_q, res) => {
          gone.abort();
          res.socket!.destroy();
        },
      }),
    );
    await expect(run(agentBody(20), { gone })).rejects.toThrow();
    expect(calls()).toHaveLength(2);
  });
});

describe('when the gateway does not compact', () => {
  it('compaction off (maxReplays 0), or the client opted out: the rejection as it came', async () => {
    upstream = await startFakeUpstream(provider(10_000));
    const off = await run(agentBody(20), { config: { compaction: { maxReplays: 0 } } });
    expect(off.status).toBe(400);
    expect(off.header).toEqual({ outcome: 'disabled', trigger: 'rejected', reason: 'context_length' });
    expect(off.logs.find((l) => l.level === 40).msg).toMatch(/compaction is off for this request/);
    expect(await count(off.metrics, 'gateway_compactions_total', { api: 'chat', strategy: 'none', outcome: 'disabled' })).toBe(1);
    expect(await count(off.metrics, 'gateway_overlong_rejections_total', { api: 'chat', reason: 'context_length' })).toBe(1);

    const optedOut = await run(agentBody(20), { clientHeaders: { 'x-gateway-compaction': 'Off' } });
    expect(optedOut.header).toMatchObject({ outcome: 'disabled' });
    expect(calls()).toHaveLength(2);
    expect(summarizerCalls()).toHaveLength(0);
  });

  it('a body it cannot read, or with no conversation: not shrunk, no_messages, with the size it was refused at', async () => {
    upstream = await startFakeUpstream((_req, res) =>
      json(res, 413, { error: { type: 'request_too_large', message: 'Request exceeds the maximum size' } }),
    );
    const garbage = await run('{"model":"m","messages":[', {});
    // In OpenAI's overflow words for the client's agent (the upstream's are not).
    expect(garbage.status).toBe(400);
    expect(garbage.header).toEqual({
      outcome: 'not_shrunk',
      trigger: 'rejected',
      reason: 'body_too_large',
      why: 'no_messages',
      'messages-before': 0,
      'bytes-before': 25,
      'tokens-before': 0,
      'overflow-error': 'translated',
    });
    const empty = await run({ model: 'm', messages: [], prompt: 'x'.repeat(100) });
    expect(empty.header).toMatchObject({ outcome: 'not_shrunk', why: 'no_messages', 'bytes-before': 139 });
    expect(calls()).toHaveLength(2);
  });

  it('a body whose content coding cannot be undone: forwarded as it came, not shrunk, and the header says why', async () => {
    upstream = await startFakeUpstream((_req, res) =>
      json(res, 413, { error: { type: 'request_too_large', message: 'Request exceeds the maximum size' } }),
    );
    const corrupt = Buffer.from('not zstd at all, though it says so');
    const r = await run(null, { raw: corrupt, encoding: 'zstd' });
    expect(r.header).toMatchObject({ outcome: 'not_shrunk', why: 'undecodable_body' });
    expect(calls()).toHaveLength(1);
    expect(calls()[0].body.equals(corrupt)).toBe(true);
  });

  it('the completion alone is lowered when only prompt plus completion is too long', async () => {
    upstream = await startFakeUpstream((req, res) => {
      if (calls().length === 1)
        return json(res, 400, {
          error: {
            message:
              "This model's maximum context length is 37000 tokens. However, you requested 40000 tokens (8000 in the messages, 32000 in the completion). Please reduce the length of the messages or completion.",
            type: 'invalid_request_error',
            code: 'context_length_exceeded',
          },
        });
      return json(res, 200, completion('ok'));
    });
    const body = agentBody(2, { max_tokens: 32_000 });
    const r = await run(body);
    expect(r.status).toBe(200);
    expect(calls()[1].body.toString()).toBe(JSON.stringify({ ...body, max_tokens: 28_630 }));
    expect(r.header).toEqual({
      outcome: 'replayed',
      trigger: 'rejected',
      reason: 'context_length',
      limit: 'stated',
      strategy: 'clamp',
      'completion-before': 32_000,
      'completion-after': 28_630,
      'replay-status': 200,
    });
    expect(summarizerCalls()).toHaveLength(0);
  });
});

describe('Responses: a history held upstream', () => {
  it('is replayed once with truncation "auto"', async () => {
    upstream = await startFakeUpstream((req, res) => {
      if (req.json.truncation === 'auto') return json(res, 200, { id: 'resp_2', object: 'response', status: 'completed', output: [] });
      return json(res, 400, {
        error: {
          message: 'Your input exceeds the context window of this model. Please adjust your input and try again.',
          type: 'invalid_request_error',
          code: 'context_length_exceeded',
        },
      });
    });
    const body = { model: 'gpt-5', previous_response_id: 'resp_1', input: [{ role: 'user', content: 'next' }] };
    const r = await run(body, { dialect: responses });
    expect(r.status).toBe(200);
    expect(calls()).toHaveLength(2);
    expect(calls()[1].json).toEqual({ ...body, truncation: 'auto' });
    expect(r.header).toMatchObject({ outcome: 'replayed', strategy: 'truncation', 'replay-status': 200 });
    expect(r.logs.find((l) => l.level === 40).msg).toMatch(/truncation "auto", replayed once: the upstream answered 200$/);
  });

  it('already truncated: nothing more to do', async () => {
    upstream = await startFakeUpstream((_req, res) =>
      json(res, 400, {
        error: {
          message: 'Your input exceeds the context window of this model. Please adjust your input and try again.',
          type: 'invalid_request_error',
          code: 'context_length_exceeded',
        },
      }),
    );
    const r = await run({ model: 'gpt-5', previous_response_id: 'resp_1', truncation: 'auto', input: [] }, { dialect: responses });
    expect(r.status).toBe(400);
    expect(r.header).toMatchObject({ outcome: 'not_shrunk', why: 'no_messages' });
    expect(calls()).toHaveLength(1);
  });
});

describe('with memory', () => {
  const memoryConfig = (): ConfigInput => ({ memory: { enabled: true } });
  const makeMemory = () =>
    createMemory(
      validateConfig({ upstream: { url: upstream.baseUrl }, memory: { enabled: true } }),
      createMetrics(),
      pino({ level: 'silent' }),
    )!;

  it('a rejection teaches the stated limit; the next turn of the conversation goes compacted ahead', async () => {
    upstream = await startFakeUpstream(provider(20_000));
    const memory = makeMemory();
    const first = await run(agentBody(20), { config: memoryConfig(), memory, clientHeaders: { authorization: 'Bearer sk-client' } });
    expect(first.header).toMatchObject({ outcome: 'replayed', memory: 'miss' });
    expect(
      (
        await memory.remembered(
          { tenant: tenantOf({ authorization: 'Bearer sk-client' })!, upstream: upstream.baseUrl, api: 'chat', model: 'fake-model' },
          Buffer.byteLength(JSON.stringify(agentBody(20))),
        )
      ).bounds,
    ).toMatchObject({ limitTokens: 5000 });

    const body = agentBody(21);
    const next = await run(body, { config: memoryConfig(), memory, clientHeaders: { authorization: 'Bearer sk-client' } });
    expect(next.status).toBe(200);
    expect(next.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive', limit: 'learned', memory: 'hit' });
    expect(calls()).toHaveLength(3);
    expect(calls()[2].body.length).toBeLessThan(20_000);
    expect(parseCompactionHeader(calls()[2].headers['x-gateway-compaction'] as string)).toMatchObject({ trigger: 'proactive' });
    // Accepted, it is an INFO line: a WARN is for what the upstream refused.
    expect(next.logs.find((l) => /compacted before/.test(l.msg))).toMatchObject({
      level: 30,
      msg: expect.stringMatching(/^chat request extends a conversation compacted before .*sending it compacted$/),
    });

    const other = await run(body, { config: memoryConfig(), memory, clientHeaders: { authorization: 'Bearer sk-someone-else' } });
    expect(other.header).toMatchObject({ trigger: 'rejected' });
    const optOut = await run(agentBody(21), {
      config: memoryConfig(),
      memory,
      clientHeaders: { authorization: 'Bearer sk-client', 'x-gateway-compaction': 'off' },
    });
    expect(optOut.header).toMatchObject({ outcome: 'disabled' });
    await memory.close();
  });

  it('a remembered summary that no longer fits is extended ahead, by the summarizer', async () => {
    upstream = await startFakeUpstream(provider(20_000));
    const memory = makeMemory();
    const tenant = { authorization: 'Bearer sk-client' };
    const config = { ...memoryConfig(), ...NO_MASK };
    await run(agentBody(20), { config, memory, clientHeaders: tenant });
    const before = summarizerCalls().length;
    const r = await run(agentBody(40), { config, memory, clientHeaders: tenant });
    expect(r.status).toBe(200);
    expect(r.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive', memory: 'hit' });
    expect(summarizerCalls().length).toBeGreaterThan(before);
    const ahead = calls()[2];
    expect(ahead.body.length).toBeLessThan(20_000);
    const summary = ahead.json.messages.find((m: any) => typeof m.content === 'string' && m.content.startsWith('[compaction-gateway]'));
    expect(summary.content).toContain("because the conversation had outgrown the upstream's limit before");
    await memory.close();
  });

  it('tokens-before of a compaction ahead is in this conversation’s bytes per token, remembered with its compaction', async () => {
    upstream = await startFakeUpstream(provider(20_000));
    const memory = makeMemory();
    const tenant = { authorization: 'Bearer sk-client' };
    const first = Buffer.byteLength(JSON.stringify(agentBody(20)));
    await run(agentBody(20), { config: memoryConfig(), memory, clientHeaders: tenant });
    const bytesPerToken = first / Math.ceil(first / 4);
    const next = Buffer.byteLength(JSON.stringify(agentBody(21)));
    const started = performance.now();
    const r = await run(agentBody(21), { config: memoryConfig(), memory, clientHeaders: tenant });
    const elapsedMs = performance.now() - started;
    const sent = calls()[2].body.length;
    expect(r.header).toMatchObject({
      trigger: 'proactive',
      'tokens-before': Math.round(next / bytesPerToken),
      'bytes-before': next,
      'bytes-after': sent,
    });
    expect(r.header!['tokens-after']).toBe(Math.round(sent / bytesPerToken));
    // The duration it reports lies within the call.
    const decided = r.logs.find((l) => l.compaction?.trigger === 'proactive');
    expect(decided.compaction.durationMs).toBeGreaterThanOrEqual(0);
    expect(decided.compaction.durationMs).toBeLessThanOrEqual(elapsedMs + 1);

    // The same conversation sent to another model is another conversation: its window may be
    // larger, so nothing remembered for this one is sent ahead for it.
    const other = agentBody(21, { model: 'other-model' });
    const r2 = await run(other, { config: memoryConfig(), memory, clientHeaders: tenant });
    expect(r2.header).toMatchObject({ trigger: 'rejected', memory: 'miss' });
    await memory.close();
  });

  it('a compaction ahead that cannot fit sends the request as it came, unmarked', async () => {
    upstream = await startFakeUpstream(provider(20_000));
    const memory = makeMemory();
    const tenant = { authorization: 'Bearer sk-client' };
    await run(agentBody(20), { config: memoryConfig(), memory, clientHeaders: tenant });
    const body = agentBody(21);
    (body.messages.at(-1) as { content: string }).content = 'please read this log: ' + 'x'.repeat(30_000);
    const r = await run(body, { config: memoryConfig(), memory, clientHeaders: tenant });
    expect(calls()[2].body.toString()).toBe(JSON.stringify(body));
    expect(calls()[2].headers['x-gateway-compaction']).toBeUndefined();
    expect(r.header).toMatchObject({ trigger: 'rejected' });
    await memory.close();
  });

  it('a limit learned since, counting the completion, tightens what the remembered compaction knew to fit', async () => {
    let limit = 20_000;
    upstream = await startFakeUpstream((req, res, raw) => provider(limit)(req, res, raw));
    const memory = makeMemory();
    const tenant = { authorization: 'Bearer sk-client' };
    await run(agentBody(20, { max_tokens: 1500 }), { config: memoryConfig(), memory, clientHeaders: tenant });
    const who = { tenant: tenantOf(tenant)!, upstream: upstream.baseUrl, api: 'chat', model: 'fake-model' };
    await memory.learn(who, { limitTokens: 3000, completionCounted: true });
    limit = 6_000;
    const r = await run(agentBody(21, { max_tokens: 1500 }), { config: memoryConfig(), memory, clientHeaders: tenant });
    expect(r.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
    expect(calls()).toHaveLength(3);
    // Within what now fits (5,400 bytes: 90% of 1,500 tokens at 4 bytes), aiming at half the room.
    expect(calls()[2].body.length).toBeLessThanOrEqual(3_000);
    await memory.close();
  });

  it('proactive compaction off: the next turn goes as sent, and its rescue reuses the remembered summary', async () => {
    upstream = await startFakeUpstream(provider(20_000));
    const memory = makeMemory();
    const tenant = { authorization: 'Bearer sk-client' };
    const config = { memory: { enabled: true }, compaction: { proactive: false } };
    await run(agentBody(20), { config, memory, clientHeaders: tenant });
    const body = agentBody(21);
    const r = await run(body, { config, memory, clientHeaders: tenant });
    expect(calls()[2].body.toString()).toBe(JSON.stringify(body));
    expect(r.header).toMatchObject({ outcome: 'replayed', trigger: 'rejected', memory: 'hit' });
    await memory.close();
  });

  it('replays off: a remembered conversation is not compacted ahead either', async () => {
    upstream = await startFakeUpstream(provider(20_000));
    const memory = makeMemory();
    const tenant = { authorization: 'Bearer sk-client' };
    await run(agentBody(20), { config: memoryConfig(), memory, clientHeaders: tenant });
    const body = agentBody(21);
    const r = await run(body, { config: { memory: { enabled: true }, compaction: { maxReplays: 0 } }, memory, clientHeaders: tenant });
    expect(calls()[2].body.toString()).toBe(JSON.stringify(body));
    expect(r.header).toMatchObject({ outcome: 'disabled' });
    await memory.close();
  });

  it('only a conversation the tenant had compacted goes ahead; an unreadable body goes as sent', async () => {
    upstream = await startFakeUpstream(provider(20_000));
    const memory = makeMemory();
    const tenant = { authorization: 'Bearer sk-client' };
    await run(agentBody(20), { config: memoryConfig(), memory, clientHeaders: tenant });
    const unrelated = { model: 'fake-model', messages: [{ role: 'user', content: 'a new task' }] };
    const fresh = await run(unrelated, { config: memoryConfig(), memory, clientHeaders: tenant });
    expect(fresh.header).toBeUndefined();
    expect(calls()[2].body.toString()).toBe(JSON.stringify(unrelated));
    const garbage = await run('{"model":"fake-model","messages":[', { config: memoryConfig(), memory, clientHeaders: tenant });
    expect(garbage.header).toBeUndefined();
    expect(calls()[3].body.toString()).toBe('{"model":"fake-model","messages":[');
    const noConversation = await run({ model: 'fake-model', prompt: 'hello' }, { config: memoryConfig(), memory, clientHeaders: tenant });
    expect(noConversation.header).toBeUndefined();
    expect(calls()[4].json).toEqual({ model: 'fake-model', prompt: 'hello' });
    await memory.close();
  });

  it('a compaction sent ahead and still refused is rescued from the request itself, once', async () => {
    let limit = 20_000;
    upstream = await startFakeUpstream((req, res, raw) => provider(limit)(req, res, raw));
    const memory = makeMemory();
    const tenant = { authorization: 'Bearer sk-client' };
    await run(agentBody(20), { config: memoryConfig(), memory, clientHeaders: tenant });
    limit = 6_000;
    const r = await run(agentBody(21), { config: memoryConfig(), memory, clientHeaders: tenant });
    const [, , ahead, replay] = calls();
    expect(calls()).toHaveLength(4);
    expect(parseCompactionHeader(ahead.headers['x-gateway-compaction'] as string)).toMatchObject({ trigger: 'proactive' });
    expect(r.header).toMatchObject({ outcome: 'replayed', trigger: 'rejected', memory: 'miss' });
    expect(replay.body.length).toBeLessThan(6_000);
    expect(r.status).toBe(200);
    await memory.close();
  });
});
