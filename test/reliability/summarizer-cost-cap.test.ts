import { afterEach, describe, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream, type Handler, type Received } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { isSummarizer, parseCompactionHeader, toolTurnsBody } from '../helpers/rescue.js';
import { Client, LIMIT_BYTES, provider } from './helpers.js';

/*
 * What one compaction may spend on the summarizer: `summarizer.maxCalls` calls and
 * `summarizer.maxInputBytes` bytes of call bodies, merges and runs chunked again included. Past
 * either, the oldest part of the condensed messages goes to the deterministic digest, the newest
 * to the summarizer, and the client still gets its answer. (A 51 MB conversation once made 302
 * summarizer calls, 52.6 MB of billed input, for a request the provider had refused for free.)
 */

let upstream: FakeUpstream | undefined;
let gateway: TestGateway | undefined;
let client: Client | undefined;
afterEach(async () => {
  await client?.close();
  await gateway?.close();
  await upstream?.close();
  client = gateway = upstream = undefined;
});

/**
 * 150 tool turns of 20 KB each, about 3 MB. Uncapped, its summarizer calls are sized to the
 * upstream's own 60 KB window (the summarizer is the upstream's model): some 75 calls.
 */
const TURNS = 150;
const big = () => toolTurnsBody(TURNS, (t) => `contents of src/f${t}.ts\n${`line ${t} of a long file\n`.repeat(800)}`);

const summaryAnswer = (_req: Parameters<Handler>[0], res: Parameters<Handler>[1]) =>
  json(res, 200, completion('SUMMARY: the agent read many files.'));

async function rescue(summarizer: Record<string, unknown>, answer: Handler = summaryAnswer) {
  upstream = await startFakeUpstream(provider({ summarizer: answer }).handler);
  gateway = await startGateway({ upstream: { url: upstream.baseUrl }, summarizer, compaction: { mask: false } });
  client = new Client();
  const res = await client.post(`${gateway.baseUrl}/chat/completions`, big());
  const calls = upstream.received.filter(isSummarizer);
  const chats = upstream.received.filter((r) => !isSummarizer(r));
  return { res, calls, chats, bytes: calls.reduce((sum, c) => sum + c.body.length, 0) };
}

const transcriptOf = (r: Received): string => r.json.messages[1].content;
/** The tool turns whose results a summarizer call read. */
const turnsRead = (calls: Received[]) =>
  [...new Set(calls.flatMap((c) => [...transcriptOf(c).matchAll(/^\[tool result call_(\d+)\]$/gm)].map((m) => Number(m[1]))))].sort(
    (a, b) => a - b,
  );

function summaryOf(replay: Received): string {
  const summary = replay.json.messages.find((m: { content?: unknown }) => String(m.content).startsWith('[compaction-gateway]'));
  expect(summary, 'the summary message').toBeDefined();
  return summary.content;
}

/** The client got its answer from a valid, smaller replay whose summary starts with the digest of the oldest messages. */
function expectRescuedWithDigest(r: Awaited<ReturnType<typeof rescue>>): number {
  expect(r.res.status).toBe(200);
  expect(r.res.json.choices[0].message.content).toBe('rescued answer');
  expect(parseCompactionHeader(r.res.headers['x-gateway-compaction'] as string)).toMatchObject({
    outcome: 'replayed',
    strategy: 'summarize',
  });
  expect(r.chats).toHaveLength(2);
  expect(r.chats[1].body.length).toBeLessThanOrEqual(LIMIT_BYTES);
  const summary = summaryOf(r.chats[1]);
  const digest =
    /The oldest ([\d,]+) messages \(about [\d,.]+\w? tokens\) were past the summarizer's cost cap for one compaction and were condensed without a model summary; a mechanical digest of them:\nTool calls: ([\d,]+) \(read_file [\d,]+\)\.\nThe summary of the newer messages follows\.\n\nSUMMARY: the agent read many files\./.exec(
      summary,
    );
  expect(digest, summary.slice(0, 600)).not.toBeNull();
  expect(summary).toContain('[trail of the condensed messages, read off them by the gateway]');
  const digested = Number(digest![1].replace(/,/g, ''));
  // The middle starts after the system prompt and the task: turn t's call is middle item 2t, its result 2t + 1.
  const read = turnsRead(r.calls);
  const first = read[0];
  expect(first).toBeGreaterThan(0);
  expect([2 * first, 2 * first + 1]).toContain(digested);
  // Newer than the digested part, every turn up to the kept tail was read, none skipped.
  expect(read).toEqual(Array.from({ length: read.length }, (_, i) => first + i));
  expect(Number(digest![2])).toBe(Math.ceil(digested / 2));
  // The cap is said, with its numbers, in the summarizer's line: INFO, as a WARN is for what the upstream refused.
  const warned = gateway!.logLines().filter((l) => l.level === 30 && /cost cap/.test(l.msg));
  expect(warned).toHaveLength(1);
  expect(warned[0]).toMatchObject({ digested, calls: r.calls.length });
  return digested;
}

describe("the summarizer's cost cap for one compaction", () => {
  it('maxCalls 4: four calls at most, parts and merge counted; the oldest messages get the digest', async () => {
    const r = await rescue({ maxCalls: 4 });
    expect(r.calls.length).toBeLessThanOrEqual(4);
    // A map-reduce still: parts, then their merge.
    expect(r.calls.length).toBeGreaterThan(1);
    expect(transcriptOf(r.calls.at(-1)!)).toMatch(/^<conversation>\nThe following are summaries/);
    expect(expectRescuedWithDigest(r)).toBeGreaterThan(TURNS);
  });

  it('by default, 16 calls and 4 MiB of input at most', async () => {
    const r = await rescue({});
    expect(r.calls.length).toBeLessThanOrEqual(16);
    expect(r.bytes).toBeLessThanOrEqual(4 * 1024 * 1024);
    expectRescuedWithDigest(r);
  });

  it('the same conversation with the caps lifted is summarised whole, in more calls than the default cap', async () => {
    const r = await rescue({ maxCalls: 1_000, maxInputBytes: 1024 * 1024 * 1024 });
    expect(r.res.status).toBe(200);
    expect(r.calls.length).toBeGreaterThan(16);
    expect(summaryOf(r.chats[1])).not.toContain('cost cap');
    expect(turnsRead(r.calls)[0]).toBe(0);
  });

  it('maxInputBytes 512 KiB: the bodies sent to the summarizer add up to no more, in fewer calls than maxCalls', async () => {
    const r = await rescue({ maxInputBytes: 512 * 1024, maxCalls: 100 });
    expect(r.bytes).toBeLessThanOrEqual(512 * 1024);
    expect(r.calls.length).toBeLessThan(100);
    expectRescuedWithDigest(r);
  });

  it('a summarizer of its own, read at its full window (60,000 tokens): 2 MiB of input binds before 100 calls', async () => {
    const own = await startFakeUpstream(summaryAnswer);
    try {
      const r = await rescue({ url: own.baseUrl, model: 'summarizer', maxCalls: 100, maxInputBytes: 2 * 1024 * 1024 });
      const calls = own.received;
      const bytes = calls.reduce((sum, c) => sum + c.body.length, 0);
      expect(bytes).toBeLessThanOrEqual(2 * 1024 * 1024);
      // Most of it spent: parts of about 170 KB each.
      expect(bytes).toBeGreaterThan(1.5 * 1024 * 1024);
      expect(calls.length).toBeLessThan(100);
      expectRescuedWithDigest({ ...r, calls });
    } finally {
      await own.close();
    }
  });

  it('calls the summarizer refused as too long, and the run chunked again after them, count too', async () => {
    // The upstream's own model plays the summarizer, with a smaller window for it than the
    // gateway assumes: every first-size call is refused, and the run starts again smaller.
    let refused = 0;
    const window: Handler = (req, res) => {
      if (req.body.length > 30_000) {
        refused++;
        return json(res, 400, {
          error: {
            message: `This model's maximum context length is 7000 tokens. However, your messages resulted in ${Math.ceil(req.body.length / 4)} tokens. Please reduce the length of the messages.`,
            type: 'invalid_request_error',
            param: 'messages',
            code: 'context_length_exceeded',
          },
        });
      }
      return summaryAnswer(req, res);
    };
    const r = await rescue({ maxCalls: 8 }, window);
    expect(refused).toBeGreaterThan(0);
    expect(r.calls.length).toBeLessThanOrEqual(8);
    expect(r.calls.filter((c) => c.body.length <= 30_000).length).toBeGreaterThan(0);
    expect(r.res.status).toBe(200);
    expect(r.res.json.choices[0].message.content).toBe('rescued answer');
    expect(summaryOf(r.chats[1])).toContain("were past the summarizer's cost cap for one compaction");
  });
});
