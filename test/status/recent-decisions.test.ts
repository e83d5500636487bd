import { describe, expect, it } from 'vitest';
import type { CompactionResult, NewSpan } from '../../src/compaction/index.js';
import type { RescueRecord } from '../../src/rescue/report.js';
import { FACT_CHARS, SUMMARY_CHARS, TRAIL_FACTS, runsOf } from '../../src/status/entry.js';
import { RECENT_CAPACITY, RecentDecisions } from '../../src/status/recent.js';

/*
 * The status page's feed: a fixed ring of copies, each of a bounded size whatever the
 * conversation held, content kept only when asked to, and a tally per upstream and API.
 */

const HUGE = 'x'.repeat(1_000_000);
const facts = (n: number) => Array.from({ length: n }, (_, i) => `fact ${i} ${'y'.repeat(10_000)}`);

function span(over: Partial<NewSpan> = {}): NewSpan {
  return {
    fixedEnd: 2,
    spanLength: 40,
    pinnedOffsets: [30],
    summary: [{ role: 'user', content: HUGE }],
    summaryText: HUGE,
    trail: { changed: facts(200), read: facts(200), commands: facts(200), errors: facts(200), said: facts(200) },
    summarizedCount: 39,
    strategy: 'summarize',
    summarizerCalls: 3,
    bound: { freshFrom: 50, stripAll: false },
    ...over,
  };
}

const BIG = span();

function compacted(over: Partial<Extract<CompactionResult, { outcome: 'compacted' }>> = {}): CompactionResult {
  const s = BIG;
  return {
    outcome: 'compacted',
    body: Buffer.alloc(1_000_000),
    strategy: 'summarize',
    messagesBefore: 50,
    messagesAfter: 12,
    bytesBefore: 400_000,
    bytesAfter: 90_000,
    tokensBefore: 100_000,
    tokensAfter: 22_500,
    summarizerMs: 812.6,
    summarizerCalls: 3,
    summarizerTokens: { input: 70_000, output: 900, estimated: false },
    memory: 'miss',
    cut: 0,
    headers: {},
    bound: null,
    restrip: () => null,
    newSpan: s,
    span: s,
    ...over,
  };
}

const replayed = (over: Partial<RescueRecord> = {}): RescueRecord => ({
  api: 'chat',
  upstream: 'default',
  outcome: 'replayed',
  trigger: 'rejected',
  reason: 'context_length',
  rejectedStatus: 400,
  statedTokens: 32_768,
  remedy: 'compaction',
  limit: 'stated',
  compaction: compacted(),
  replayStatus: 200,
  durationMs: 901.2,
  ...over,
});

describe('RecentDecisions', () => {
  it(`keeps the last ${RECENT_CAPACITY}, newest first, each a bounded copy`, () => {
    const recent = new RecentDecisions(true);
    for (let i = 0; i < 3 * RECENT_CAPACITY + 7; i++) recent.decided(replayed(), { requestId: `req-${i}`, model: 'm' });
    const entries = recent.entries();
    expect(entries).toHaveLength(RECENT_CAPACITY);
    expect(recent.decisions).toBe(3 * RECENT_CAPACITY + 7);
    expect(entries.map((e) => e.id)).toEqual(Array.from({ length: RECENT_CAPACITY }, (_, i) => 3 * RECENT_CAPACITY + 7 - i));
    expect(entries[0].requestId).toBe(`req-${3 * RECENT_CAPACITY + 6}`);
    const e = entries[0];
    expect(e.content!.summary).toHaveLength(SUMMARY_CHARS);
    expect(e.content!.summaryChars).toBe(HUGE.length);
    for (const list of Object.values(e.content!.trail!)) {
      expect(list).toHaveLength(TRAIL_FACTS);
      for (const fact of list) expect(fact.length).toBeLessThanOrEqual(FACT_CHARS);
    }
    // The newest facts: the trail is oldest first.
    expect(e.content!.trail!.said.at(-1)).toMatch(/^fact 199 /);
    // Nothing of the request's bodies: the whole ring is a fixed size.
    const bytes = Buffer.byteLength(JSON.stringify(entries));
    expect(bytes).toBeLessThan(RECENT_CAPACITY * (SUMMARY_CHARS + 5 * TRAIL_FACTS * (FACT_CHARS + 8) + 2_000));
  });

  it('copies the figures the page shows', () => {
    const recent = new RecentDecisions(true, 5, () => new Date('2026-01-02T03:04:05.000Z'));
    recent.decided(replayed(), { requestId: 'r1', model: 'qwen3' });
    const [e] = recent.entries();
    expect(e).toMatchObject({
      id: 1,
      at: '2026-01-02T03:04:05.000Z',
      requestId: 'r1',
      upstream: 'default',
      api: 'chat',
      model: 'qwen3',
      trigger: 'rejected',
      outcome: 'replayed',
      rejectedStatus: 400,
      strategy: 'summarize',
      limit: 'stated',
      windowTokens: 32_768,
      before: { items: 50, bytes: 400_000, tokens: 100_000 },
      after: { items: 12, bytes: 90_000, tokens: 22_500 },
      memory: 'miss',
      cut: 0,
      summarizer: { calls: 3, ms: 813, inputTokens: 70_000, outputTokens: 900 },
      replayStatus: 200,
      durationMs: 901,
      items: [
        { from: 0, to: 2, fate: 'kept' },
        { from: 2, to: 32, fate: 'condensed' },
        { from: 32, to: 33, fate: 'pinned' },
        { from: 33, to: 42, fate: 'condensed' },
        { from: 42, to: 50, fate: 'kept' },
      ],
    });
    expect(e).not.toHaveProperty('masked');
  });

  it('keeps no content when told not to, and none for masking (there is no text of its own)', () => {
    const off = new RecentDecisions(false);
    off.decided(replayed(), {});
    expect(off.entries()[0]).not.toHaveProperty('content');
    expect(JSON.stringify(off.entries())).not.toContain('xxxx');
    expect(JSON.stringify(off.entries())).not.toContain('fact 1');

    const on = new RecentDecisions(true);
    const masked = span({ strategy: 'mask', summaryText: '', trail: undefined, summarizedCount: 17, pinnedOffsets: [] });
    on.decided(
      replayed({
        compaction: compacted({
          strategy: 'mask',
          summarizerCalls: 0,
          summarizerMs: undefined,
          summarizerTokens: undefined,
          span: masked,
          newSpan: masked,
        }),
      }),
      {},
    );
    const [e] = on.entries();
    expect(e).toMatchObject({
      strategy: 'mask',
      masked: 17,
      items: [{ fate: 'kept' }, { from: 2, to: 42, fate: 'masked' }, { fate: 'kept' }],
    });
    expect(e).not.toHaveProperty('content');
    expect(e).not.toHaveProperty('summarizer');
  });

  it('tallies per upstream and API: refused, rescued, ahead, not rescued by outcome, the summarizer', () => {
    const recent = new RecentDecisions(false);
    recent.decided(replayed(), {});
    recent.decided(replayed({ outcome: 'replay_failed', replayStatus: 400 }), {});
    recent.decided(
      replayed({
        api: 'messages',
        upstream: 'claude',
        outcome: 'not_shrunk',
        compaction: {
          outcome: 'not_shrunk',
          why: 'nothing_to_shrink',
          summarizerCalls: 0,
          messagesBefore: 3,
          bytesBefore: 9,
          tokensBefore: 2,
        },
      }),
      {},
    );
    recent.decided(
      replayed({
        trigger: 'proactive',
        outcome: 'compacted',
        reason: undefined,
        rejectedStatus: undefined,
        compaction: compacted({ summarizerCalls: 0, summarizerTokens: undefined, memory: 'hit' }),
      }),
      {},
    );
    recent.cutStreamed({ api: 'chat', upstream: 'default', reportedTokens: 2048, expectedTokens: 9000, bytes: 36_000 }, { model: 'llama' });
    const totals = recent.totals();
    expect(totals).toEqual([
      {
        upstream: 'default',
        api: 'chat',
        refused: 2,
        truncated: 1,
        rescued: 1,
        ahead: 1,
        failed: { replay_failed: 1 },
        summarizerCalls: 6,
        summarizerTokens: { input: 140_000, output: 1_800 },
        tokensRemoved: 3 * 77_500,
      },
      {
        upstream: 'claude',
        api: 'messages',
        refused: 1,
        truncated: 0,
        rescued: 0,
        ahead: 0,
        failed: { not_shrunk: 1 },
        summarizerCalls: 0,
        summarizerTokens: { input: 0, output: 0 },
        tokensRemoved: 0,
      },
    ]);
    expect(recent.entries()[0]).toMatchObject({
      trigger: 'truncated',
      outcome: 'relayed',
      model: 'llama',
      windowTokens: 2048,
      before: { tokens: 9000, bytes: 36_000 },
      after: { tokens: 2048 },
    });
    // A copy: the page cannot change the tallies.
    totals[0].refused = 99;
    expect(recent.totals()[0].refused).toBe(2);
  });
});

describe('runsOf', () => {
  it('a span with no pins, and one that reaches the end', () => {
    expect(runsOf({ fixedEnd: 1, spanLength: 4, pinnedOffsets: [], strategy: 'fallback' }, 9)).toEqual([
      { from: 0, to: 1, fate: 'kept' },
      { from: 1, to: 5, fate: 'condensed' },
      { from: 5, to: 9, fate: 'kept' },
    ]);
    expect(runsOf({ fixedEnd: 0, spanLength: 9, pinnedOffsets: [8], strategy: 'summarize' }, 9)).toEqual([
      { from: 0, to: 8, fate: 'condensed' },
      { from: 8, to: 9, fate: 'pinned' },
    ]);
  });
});
