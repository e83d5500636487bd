import { describe, expect, it } from 'vitest';
import type { CompactionResult } from '../../src/compaction/index.js';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.js';
import { compactionHeader, countCompaction, countRescue, logDecision, seconds, type RescueRecord } from '../../src/rescue/report.js';

/*
 * What a rescue tells the operator: the x-gateway-compaction header, the one WARN line with the
 * numbers in it, and the metrics. Each record shape a rescue can end in, as the client and the
 * operator see it.
 */

const compacted = (over: Partial<Extract<CompactionResult, { outcome: 'compacted' }>> = {}): CompactionResult => ({
  outcome: 'compacted',
  body: Buffer.from('{}'),
  strategy: 'summarize',
  messagesBefore: 212,
  messagesAfter: 14,
  bytesBefore: 1_234_567,
  bytesAfter: 98_765,
  tokensBefore: 411_522.6,
  tokensAfter: 32_921.4,
  summarizerMs: 1534.4,
  summarizerCalls: 2,
  memory: 'miss',
  cut: 0,
  headers: {},
  bound: null,
  restrip: () => null,
  ...over,
});

const notShrunk: CompactionResult = {
  outcome: 'not_shrunk',
  why: 'nothing_to_shrink',
  summarizerCalls: 0,
  messagesBefore: 3,
  bytesBefore: 2048,
  tokensBefore: 683,
};

function logger() {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg: string) => lines.push({ level, obj, msg });
  const log = { info: at('info'), warn: at('warn'), error: at('error') } as never;
  return { log, lines };
}

/** A sample's value by its full name (a histogram's `_sum`, `_count`) and labels. */
async function value(metrics: Metrics, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const metric = metrics.registry.getSingleMetric(name.replace(/_(sum|count)$/, ''))!;
  const { values } = await metric.get();
  const match = values.find(
    (v) =>
      ((v as { metricName?: string }).metricName ?? (metric as unknown as { name: string }).name) === name &&
      Object.entries(labels).every(([k, l]) => (v.labels as Record<string, unknown>)[k] === l),
  );
  return match?.value;
}

describe('compactionHeader', () => {
  it('a replayed compaction: every figure, in order, numbers rounded', () => {
    const record: RescueRecord = {
      api: 'chat',
      outcome: 'replayed',
      trigger: 'rejected',
      reason: 'context_length',
      remedy: 'compaction',
      limit: 'stated',
      compaction: compacted({ memory: 'hit', cut: 2, summarizerFailure: 'timeout' }),
      replayStatus: 200,
    };
    expect(compactionHeader(record)).toBe(
      'outcome=replayed, trigger=rejected, reason=context_length, limit=stated, memory=hit, strategy=summarize, messages-before=212, messages-after=14, ' +
        'bytes-before=1234567, bytes-after=98765, tokens-before=411523, tokens-after=32921, cut=2, summarizer-ms=1534, summarizer-failure=timeout, replay-status=200',
    );
  });

  it('a compaction that did not shrink says why, and none of the after figures', () => {
    const record: RescueRecord = {
      api: 'chat',
      outcome: 'not_shrunk',
      trigger: 'rejected',
      reason: 'body_too_large',
      compaction: notShrunk,
    };
    expect(compactionHeader(record)).toBe(
      'outcome=not_shrunk, trigger=rejected, reason=body_too_large, why=nothing_to_shrink, messages-before=3, bytes-before=2048, tokens-before=683',
    );
  });

  it('a clamp names its strategy and the completion before and after', () => {
    const record: RescueRecord = {
      api: 'responses',
      outcome: 'replayed',
      trigger: 'rejected',
      reason: 'context_length',
      remedy: 'clamp',
      limit: 'stated',
      completion: { before: 8000, after: 1200 },
    };
    expect(compactionHeader(record)).toBe(
      'outcome=replayed, trigger=rejected, reason=context_length, limit=stated, strategy=clamp, completion-before=8000, completion-after=1200',
    );
  });

  it('a truncation names its strategy; a disabled rescue only its outcome and reason', () => {
    expect(
      compactionHeader({ api: 'responses', outcome: 'replayed', trigger: 'rejected', reason: 'context_length', remedy: 'truncation' }),
    ).toBe('outcome=replayed, trigger=rejected, reason=context_length, strategy=truncation');
    expect(compactionHeader({ api: 'chat', outcome: 'disabled', trigger: 'rejected', reason: 'context_length' })).toBe(
      'outcome=disabled, trigger=rejected, reason=context_length',
    );
  });

  it('a proactive compaction with no cut still says cut=0', () => {
    const header = compactionHeader({
      api: 'chat',
      outcome: 'compacted',
      trigger: 'proactive',
      compaction: compacted({ summarizerMs: undefined, summarizerCalls: 0, memory: 'hit' }),
      limit: 'learned',
    });
    expect(header).toBe(
      'outcome=compacted, trigger=proactive, limit=learned, memory=hit, strategy=summarize, messages-before=212, messages-after=14, bytes-before=1234567, bytes-after=98765, tokens-before=411523, tokens-after=32921, cut=0',
    );
  });
});

describe('logDecision: one line, once the rescue ended, with the numbers in the sentence', () => {
  const base = { api: 'chat', trigger: 'rejected', reason: 'context_length', rejectedStatus: 400 } as const;

  it('compaction off', () => {
    const { log, lines } = logger();
    logDecision(log, { ...base, outcome: 'disabled' });
    expect(lines).toHaveLength(1);
    expect(lines[0].msg).toBe(
      'upstream rejected the chat request as overlong (400 context_length, limit unknown): compaction is off for this request; passing the upstream error through',
    );
    expect(lines[0].obj).toEqual({
      compaction: { api: 'chat', trigger: 'rejected', reason: 'context_length', rejectedStatus: 400, outcome: 'disabled' },
    });
  });

  it('a clamp', () => {
    const { log, lines } = logger();
    logDecision(log, {
      ...base,
      outcome: 'replayed',
      remedy: 'clamp',
      limit: 'stated',
      completion: { before: 4096, after: 1000 },
      durationMs: 1.6,
      replayStatus: 200,
    });
    expect(lines[0].msg).toBe(
      'upstream rejected the chat request as overlong (400 context_length, limit stated): the prompt fits; lowered the completion limit from 4096 to 1000, replayed once: the upstream answered 200',
    );
    expect(lines[0].obj.compaction).toMatchObject({
      strategy: 'clamp',
      completionBefore: 4096,
      completionAfter: 1000,
      durationMs: 2,
      remedy: 'clamp',
    });
    expect(lines[0].obj.compaction).not.toHaveProperty('completion');
  });

  it('a truncation', () => {
    const { log, lines } = logger();
    logDecision(log, { ...base, api: 'responses', outcome: 'replayed', remedy: 'truncation', replayStatus: 200 });
    expect(lines[0].msg).toBe(
      'upstream rejected the responses request as overlong (400 context_length, limit unknown): its history is held upstream (previous_response_id); truncation "auto", replayed once: the upstream answered 200',
    );
  });

  it('no useful compaction, with the size in the unit that reads best', () => {
    const { log, lines } = logger();
    logDecision(log, { ...base, outcome: 'not_shrunk', compaction: notShrunk });
    logDecision(log, { ...base, outcome: 'not_shrunk', compaction: { ...notShrunk, bytesBefore: 999 } });
    logDecision(log, { ...base, outcome: 'not_shrunk', compaction: { ...notShrunk, bytesBefore: 2_500_000, why: 'cannot_fit' } });
    logDecision(log, { ...base, outcome: 'not_shrunk', compaction: { ...notShrunk, bytesBefore: 1_000_000 } });
    expect(lines.map((l) => l.msg)).toEqual([
      'upstream rejected the chat request as overlong (400 context_length, limit unknown): no useful compaction (nothing_to_shrink, 3 items, 2 KB); passing the upstream error through',
      'upstream rejected the chat request as overlong (400 context_length, limit unknown): no useful compaction (nothing_to_shrink, 3 items, 999 B); passing the upstream error through',
      'upstream rejected the chat request as overlong (400 context_length, limit unknown): no useful compaction (cannot_fit, 3 items, 2.50 MB); passing the upstream error through',
      'upstream rejected the chat request as overlong (400 context_length, limit unknown): no useful compaction (nothing_to_shrink, 3 items, 1.00 MB); passing the upstream error through',
    ]);
    expect(lines[0].obj.compaction).toMatchObject({ compaction: 'not_shrunk', why: 'nothing_to_shrink', bytesBefore: 2048 });
  });

  it('a compaction, with the summarizer time, the memory, the cuts and a fallback', () => {
    const { log, lines } = logger();
    const replayed = { ...base, outcome: 'replayed', remedy: 'compaction', replayStatus: 200 } as const;
    logDecision(log, { ...replayed, limit: 'stated', compaction: compacted() });
    logDecision(log, {
      ...replayed,
      limit: 'default',
      compaction: compacted({ strategy: 'fallback', summarizerMs: 250.4, summarizerFailure: 'rejected', cut: 3 }),
    });
    logDecision(log, {
      ...replayed,
      limit: 'stated',
      compaction: compacted({ memory: 'hit', summarizerCalls: 0, summarizerMs: undefined }),
    });
    logDecision(log, {
      ...replayed,
      limit: 'stated',
      compaction: compacted({ memory: 'hit', summarizerCalls: 1, bytesBefore: 1000, bytesAfter: 999 }),
    });
    logDecision(log, {
      ...replayed,
      limit: 'stated',
      compaction: compacted({ memory: 'hit', summarizerCalls: 0, summarizerMs: undefined, strategy: 'mask' }),
    });
    expect(lines.map((l) => l.msg)).toEqual([
      'upstream rejected the chat request as overlong (400 context_length, limit stated): compacted 212 items into 14 (1.23 MB -> 99 KB, summarize, 1.5 s), replayed once: the upstream answered 200',
      'upstream rejected the chat request as overlong (400 context_length, limit default): compacted 212 items into 14 (1.23 MB -> 99 KB, fallback, 250 ms, 3 kept contents cut to fit) after the summarizer failed (rejected), replayed once: the upstream answered 200',
      'upstream rejected the chat request as overlong (400 context_length, limit stated): compacted 212 items into 14 (1.23 MB -> 99 KB, summarize, remembered summary reused as it was), replayed once: the upstream answered 200',
      'upstream rejected the chat request as overlong (400 context_length, limit stated): compacted 212 items into 14 (1 KB -> 999 B, summarize, 1.5 s, remembered summary extended), replayed once: the upstream answered 200',
      'upstream rejected the chat request as overlong (400 context_length, limit stated): compacted 212 items into 14 (1.23 MB -> 99 KB, mask, remembered masking reused as it was), replayed once: the upstream answered 200',
    ]);
    expect(lines.map((l) => l.level)).toEqual(['warn', 'warn', 'warn', 'warn', 'warn']);
    const fields = lines[0].obj.compaction as Record<string, unknown>;
    expect(fields).toMatchObject({
      compaction: 'compacted',
      strategy: 'summarize',
      tokensBefore: 411523,
      summarizerMs: 1534,
      messagesAfter: 14,
    });
    expect(fields).not.toHaveProperty('body');
    expect(fields).not.toHaveProperty('outcome', 'compacted');
  });

  it('a proactive compaction says it extends a remembered one and is sent compacted', () => {
    const { log, lines } = logger();
    logDecision(log, {
      api: 'responses',
      outcome: 'compacted',
      trigger: 'proactive',
      limit: 'learned',
      compaction: compacted({ newSpan: { fixedEnd: 1 } as never }),
    });
    expect(lines[0].msg).toBe(
      'responses request extends a conversation compacted before (remembered summary): compacted 212 items into 14 (1.23 MB -> 99 KB, summarize, 1.5 s), sending it compacted',
    );
    expect(lines[0].obj.compaction).not.toHaveProperty('newSpan');
  });

  it('what happened to bound thinking: stripped, kept under drop_block, a binding retry, what the upstream dropped; in the header too', () => {
    const { log, lines } = logger();
    const messages: RescueRecord = {
      ...base,
      api: 'messages',
      outcome: 'replayed',
      remedy: 'compaction',
      limit: 'stated',
      compaction: compacted(),
      replayStatus: 200,
    };
    logDecision(log, { ...messages, bound: { stripped: 3, optIn: false } });
    logDecision(log, { ...messages, bound: { stripped: 1, optIn: true }, stateDropped: 1 });
    logDecision(log, { ...messages, bound: { stripped: 5, optIn: false }, bindingRetry: true });
    logDecision(log, { ...messages, bound: { stripped: 0, optIn: false } });
    const said = lines.map((l) => l.msg.slice(l.msg.indexOf('replayed once')));
    expect(said).toEqual([
      'replayed once: the upstream answered 200; 3 stale thinking blocks stripped',
      "replayed once: the upstream answered 200; 1 stale thinking block stripped, the open round's kept under drop_block, the upstream dropped 1 bound item",
      'replayed once: the upstream answered 200; 5 stale thinking blocks stripped, sent again with all thinking stripped after a binding refusal',
      'replayed once: the upstream answered 200',
    ]);
    expect(lines[1].obj.compaction).toMatchObject({ thinkingStripped: 1, blockBinding: 'drop_block', stateDropped: 1 });
    expect(lines[1].obj.compaction).not.toHaveProperty('restrip');
    expect(
      compactionHeader({ ...messages, bound: { stripped: 5, optIn: false }, bindingRetry: true, stateDropped: 0, replayStatus: 200 }),
    ).toMatch(/, thinking-stripped=5, block-binding=none, binding-retry=1, reasoning-dropped=0, replay-status=200$/);
    // An API without bound thinking says nothing of it.
    expect(compactionHeader({ ...messages, api: 'chat', bound: null })).not.toMatch(/thinking|binding/);
  });

  it('the level tells a saved request (WARN) from one whose client got the error (ERROR); an opt-out is WARN', () => {
    const { log, lines } = logger();
    const replay = { ...base, remedy: 'compaction', limit: 'stated', compaction: compacted() } as const;
    logDecision(log, { ...replay, outcome: 'replayed', replayStatus: 200, replayResult: 'success' });
    logDecision(log, { ...replay, outcome: 'replay_failed', replayStatus: 400, replayResult: 'still_overlong' });
    logDecision(log, { ...replay, outcome: 'replay_failed', replayStatus: 503, replayResult: 'upstream_error' });
    logDecision(log, { ...replay, outcome: 'replay_failed', replayResult: 'failed', replayError: 'connect ECONNREFUSED 127.0.0.1:9' });
    logDecision(log, { ...base, outcome: 'not_shrunk', compaction: notShrunk });
    logDecision(log, { ...base, outcome: 'shed', budget: { inUse: 9e6, limit: 1e7, cost: 2e6 } });
    logDecision(log, { ...base, outcome: 'disabled' });
    logDecision(log, { ...replay, outcome: 'replay_failed', replayResult: 'failed', replayError: 'Request aborted', clientLeft: true });
    expect(lines.map((l) => [l.level, l.msg.slice(l.msg.indexOf('): ') + 3)])).toEqual([
      ['warn', 'compacted 212 items into 14 (1.23 MB -> 99 KB, summarize, 1.5 s), replayed once: the upstream answered 200'],
      [
        'error',
        'compacted 212 items into 14 (1.23 MB -> 99 KB, summarize, 1.5 s), replayed once: the upstream answered 400, overlong still, passed to the client',
      ],
      [
        'error',
        'compacted 212 items into 14 (1.23 MB -> 99 KB, summarize, 1.5 s), replayed once: the upstream answered 503, passed to the client',
      ],
      [
        'error',
        'compacted 212 items into 14 (1.23 MB -> 99 KB, summarize, 1.5 s), replayed once, which failed before the upstream answered (connect ECONNREFUSED 127.0.0.1:9); the client gets an error',
      ],
      ['error', 'no useful compaction (nothing_to_shrink, 3 items, 2 KB); passing the upstream error through'],
      [
        'error',
        'shed, rescues held about 9.00 MB already and it needed 2.00 MB more (budget 10.00 MB, compaction.rescueBudgetBytes); passing the upstream error through',
      ],
      ['warn', 'compaction is off for this request; passing the upstream error through'],
      [
        'warn',
        'compacted 212 items into 14 (1.23 MB -> 99 KB, summarize, 1.5 s), replayed once; the client left before the upstream answered (Request aborted)',
      ],
    ]);
    expect(lines[1].obj.compaction).toMatchObject({ outcome: 'replay_failed', replayStatus: 400, replayResult: 'still_overlong' });
    expect(lines[3].obj.compaction).toMatchObject({
      outcome: 'replay_failed',
      replayResult: 'failed',
      replayError: 'connect ECONNREFUSED 127.0.0.1:9',
    });
  });

  it('a request that would pass its window and cannot be made smaller is sent as it was, at WARN', () => {
    const { log, lines } = logger();
    logDecision(log, {
      api: 'chat',
      outcome: 'not_shrunk',
      trigger: 'window',
      reason: 'context_length',
      limit: 'declared',
      window: { tokens: 8192, estimate: 9000 },
      compaction: notShrunk,
    });
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: expect.stringMatching(/: no useful compaction \(nothing_to_shrink, 3 items, 2 KB\); sending it as it was$/),
      }),
    ]);
  });

  it('a replayed record with no compaction and no known remedy writes nothing', () => {
    const { log, lines } = logger();
    logDecision(log, { ...base, outcome: 'replayed' });
    expect(lines).toEqual([]);
  });
});

/** The request's upstream and the model its summarizer calls named. */
const BY = { upstream: 'default', model: 'gpt-small' };

describe('metrics', () => {
  it('countRescue counts the outcome by strategy, and the replay when there was one', async () => {
    const metrics = createMetrics();
    countRescue(metrics, { api: 'chat', outcome: 'replayed', trigger: 'rejected', remedy: 'clamp' }, 'success');
    countRescue(metrics, { api: 'chat', outcome: 'disabled', trigger: 'rejected' });
    expect(await value(metrics, 'gateway_compactions_total', { api: 'chat', strategy: 'clamp', outcome: 'replayed' })).toBe(1);
    expect(await value(metrics, 'gateway_compactions_total', { api: 'chat', strategy: 'none', outcome: 'disabled' })).toBe(1);
    expect(await value(metrics, 'gateway_replays_total', { api: 'chat', result: 'success' })).toBe(1);
    // Every series starts at 0: only one counted anything.
    expect((await metrics.registry.getSingleMetric('gateway_replays_total')!.get()).values.filter((v) => v.value > 0)).toHaveLength(1);
  });

  it('countRescue counts a rescue of a refusal by its end in gateway_rescues_total, never a compaction ahead nor one whose client left', async () => {
    const metrics = createMetrics();
    countRescue(metrics, { api: 'chat', outcome: 'not_shrunk', trigger: 'rejected', compaction: notShrunk });
    countRescue(metrics, { api: 'chat', outcome: 'shed', trigger: 'truncated' });
    countRescue(metrics, { api: 'chat', outcome: 'compacted', trigger: 'proactive', compaction: compacted() });
    countRescue(metrics, { api: 'chat', outcome: 'not_shrunk', trigger: 'window', compaction: notShrunk });
    countRescue(metrics, { api: 'chat', outcome: 'replay_failed', trigger: 'rejected', clientLeft: true }, 'failed');
    const counted = (await metrics.registry.getSingleMetric('gateway_rescues_total')!.get()).values.filter((v) => v.value > 0);
    expect(counted.map((v) => [v.labels.outcome, v.value])).toEqual([
      ['not_shrunk', 1],
      ['shed', 1],
    ]);
  });

  it('countCompaction records a compaction’s duration, calls, failure and sizes', async () => {
    const metrics = createMetrics();
    countCompaction(
      metrics,
      'chat',
      compacted({ summarizerFailure: 'timeout', summarizerTokens: { input: 5_000, output: 700, estimated: true } }),
      2500,
      BY,
    );
    const by = { upstream: 'default', model: 'gpt-small' };
    expect(await value(metrics, 'gateway_compaction_duration_seconds_sum')).toBe(2.5);
    expect(await value(metrics, 'gateway_summarizer_calls_total', by)).toBe(2);
    expect(await value(metrics, 'gateway_summarizer_failures_total', { ...by, kind: 'timeout' })).toBe(1);
    expect(await value(metrics, 'gateway_summarizer_duration_seconds_sum', by)).toBeCloseTo(1.5344, 6);
    expect(await value(metrics, 'gateway_compaction_request_bytes_sum', { stage: 'before' })).toBe(1_234_567);
    expect(await value(metrics, 'gateway_compaction_request_bytes_sum', { stage: 'after' })).toBe(98_765);
    expect(await value(metrics, 'gateway_compaction_request_tokens_sum', { stage: 'before' })).toBeCloseTo(411_522.6);
    expect(await value(metrics, 'gateway_compaction_request_tokens_sum', { stage: 'after' })).toBeCloseTo(32_921.4);
    expect(await value(metrics, 'gateway_summarizer_tokens_total', { ...by, direction: 'input', source: 'estimated' })).toBe(5_000);
    expect(await value(metrics, 'gateway_summarizer_tokens_total', { ...by, direction: 'output', source: 'estimated' })).toBe(700);
    expect(await value(metrics, 'gateway_summarizer_tokens_total', { ...by, direction: 'input', source: 'usage' })).toBe(0);
    expect(await value(metrics, 'gateway_compaction_removed_bytes_total', { api: 'chat' })).toBe(1_234_567 - 98_765);
    expect(await value(metrics, 'gateway_compaction_removed_tokens_total', { api: 'chat' })).toBeCloseTo(411_522.6 - 32_921.4);
  });

  it('countCompaction: no calls, no failure, no summarizer time; a compaction that did not shrink counts only its time', async () => {
    const metrics = createMetrics();
    countCompaction(metrics, 'chat', compacted({ summarizerCalls: 0, summarizerMs: undefined }), 10, BY);
    countCompaction(metrics, 'chat', notShrunk, 20, BY);
    expect(await value(metrics, 'gateway_compaction_duration_seconds_count')).toBe(2);
    // A model never summarised with has no series at all.
    expect((await metrics.registry.getSingleMetric('gateway_summarizer_calls_total')!.get()).values).toEqual([]);
    expect((await metrics.registry.getSingleMetric('gateway_summarizer_failures_total')!.get()).values).toEqual([]);
    expect(await value(metrics, 'gateway_compaction_request_bytes_count', { stage: 'before' })).toBe(1);
  });
});

describe('seconds', () => {
  it('milliseconds below a second, tenths of seconds above', () => {
    expect(seconds(999.4)).toBe('999 ms');
    expect(seconds(1000)).toBe('1.0 s');
    expect(seconds(12_345)).toBe('12.3 s');
  });
});
