import { Agent } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { formatCount } from '../../src/compaction/shrink.js';
import { SummarizerError, summarize, type SummarizerSettings } from '../../src/compaction/summarize.js';
import { chat } from '../../src/dialects/chat.js';
import type { Rendered } from '../../src/dialects/types.js';
import { completion, json, startFakeUpstream, type FakeUpstream, type Received } from '../helpers/fake-upstream.js';

/*
 * summarize() under its cost cap, against a summarizer on a loopback socket: however the
 * summaries come back, no more calls than `maxCalls` and no more body bytes than `maxInputBytes`;
 * the newest items the cap affords are read, the oldest digested, an earlier summary always read.
 */

let upstream: FakeUpstream;
const dispatcher = new Agent();
afterAll(() => dispatcher.close());
afterEach(async () => {
  await upstream?.close();
});

function settings(over: Partial<SummarizerSettings> = {}): SummarizerSettings {
  return {
    url: upstream.baseUrl,
    model: 'summarizer-model',
    headers: {},
    wire: chat.summarizer,
    request: { model: 'm', messages: [] },
    timeoutMs: 10_000,
    // 2,000 bytes of transcript a call: parts of two items.
    maxInputTokens: 1_000,
    maxSummaryTokens: 500,
    maxCalls: 16,
    maxInputBytes: 4 * 1024 * 1024,
    dispatcher,
    ...over,
  };
}

const said = (who: string, text: string, calls: Rendered['calls'] = []): Rendered => ({ who, text, calls });
const items = (n: number) => Array.from({ length: n }, (_, i) => said('tool result', `item ${i} `.repeat(90), i % 2 ? [] : [{ id: `c${i}`, name: 'read_file', args: '{}' }]));
const transcriptOf = (r: Received): string => r.json.messages[1].content;
const bytesOf = (calls: Received[]) => calls.reduce((sum, c) => sum + c.body.length, 0);
const readItems = (calls: Received[]) => [...new Set(calls.flatMap((c) => [...transcriptOf(c).matchAll(/ {2}item (\d+) /g)].map((m) => Number(m[1]))))].sort((a, b) => a - b);

describe('summaries that never shrink', () => {
  it('are merged in one last call, shortened, once another round would pass maxCalls', async () => {
    // Every answer is as long as a part: merging them round after round would never end.
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('S'.repeat(1_900))));
    const result = await summarize(items(12), settings({ maxCalls: 10 }), new AbortController().signal);
    expect(upstream.received.length).toBeLessThanOrEqual(10);
    expect(result.calls).toBe(upstream.received.length);
    const last = transcriptOf(upstream.received.at(-1)!);
    expect(last).toMatch(/^<conversation>\nThe following are summaries/);
    // All the summaries of the round before, each shortened to its share of the one call.
    const headers = [...last.matchAll(/^\[summary (\d+) of (\d+)\]$/gm)];
    expect(headers.length).toBeGreaterThan(1);
    expect(headers.map((h) => Number(h[1]))).toEqual(Array.from({ length: headers.length }, (_, i) => i + 1));
    expect(last).toContain('characters left out');
    expect(result.text).toMatch(/^The oldest \d+ messages/);
  });
});

describe('the newest items the cap affords', () => {
  it('are read, in order, the oldest digested before the summary; the earlier summary is read first', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('SUMMARY')));
    const result = await summarize(items(40), settings({ maxCalls: 5 }), new AbortController().signal, 'The earlier summary.');
    expect(upstream.received.length).toBeLessThanOrEqual(5);
    const read = readItems(upstream.received);
    expect(read.at(-1)).toBe(39);
    expect(read).toEqual(Array.from({ length: read.length }, (_, i) => read[0] + i));
    expect(result.digested).toBe(read[0]);
    // Items 0, 2, 4, ... call read_file: the digest counts the calls among the oldest, and a
    // quarter of their characters as tokens.
    const oldest = items(40).slice(0, read[0]);
    const chars = oldest.reduce((n, item) => n + item.text.length + item.calls.reduce((m, c) => m + c.args.length, 0), 0);
    expect(result.text).toBe(
      `The oldest ${read[0]} messages (about ${formatCount(Math.round(chars / 4))} tokens) were past the summarizer's cost cap for one compaction and were condensed without a model summary; a mechanical digest of them:\n` +
        `Tool calls: ${Math.ceil(read[0] / 2)} (read_file ${Math.ceil(read[0] / 2)}).\nThe summary of the newer messages follows.\n\nSUMMARY`,
    );
    expect(transcriptOf(upstream.received[0])).toContain('[summary of the earlier conversation]\n  The earlier summary.');
  });

  it('within maxInputBytes, whatever maxCalls allows', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('SUMMARY')));
    const result = await summarize(items(60), settings({ maxCalls: 100, maxInputBytes: 30_000 }), new AbortController().signal);
    expect(bytesOf(upstream.received)).toBeLessThanOrEqual(30_000);
    expect(result.digested).toBeGreaterThan(0);
    expect(readItems(upstream.received).at(-1)).toBe(59);
  });

  it('none when the cap is under a single call: `overlong`, with no call made', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('SUMMARY')));
    const err = await summarize(items(3), settings({ maxInputBytes: 1_000 }), new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SummarizerError);
    expect(err).toMatchObject({ kind: 'overlong', calls: 0, message: "the summarizer's cost cap for one compaction (16 calls, 1000 bytes) leaves no room for a call" });
    expect(upstream.received).toHaveLength(0);
  });

  it('all of them when they fit: nothing digested', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('SUMMARY')));
    const result = await summarize(items(6), settings(), new AbortController().signal);
    expect(result).toMatchObject({ text: 'SUMMARY', digested: 0 });
    expect(readItems(upstream.received)).toEqual([0, 1, 2, 3, 4, 5]);
  });
});
