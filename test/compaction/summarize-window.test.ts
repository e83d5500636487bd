import { Agent } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { SummarizerError, summarize, type CallFit, type SummarizerSettings } from '../../src/compaction/summarize.js';
import { chat } from '../../src/dialects/chat.js';
import type { Rendered } from '../../src/dialects/types.js';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';

/*
 * summarize() sized to the summarizer model's window: every call it makes fits what is known of
 * that window, completion included; a call refused as overlong teaches the window and the run is
 * chunked again, in the same deadline.
 */

let upstream: FakeUpstream;
const dispatcher = new Agent();
afterAll(() => dispatcher.close());
afterEach(async () => {
  await upstream?.close();
});

const WINDOW = 1_500;
/** A vLLM-like summarizer: 4 bytes a token, the completion counted; answers within max_tokens, without usage. */
function windowed(windowTokens = WINDOW) {
  return startFakeUpstream((req, res) => {
    const prompt = Math.ceil(req.body.length / 4);
    const asked = Number(req.json.max_tokens ?? 0);
    if (prompt + asked > windowTokens) {
      return json(res, 400, {
        object: 'error',
        message: `This model's maximum context length is ${windowTokens} tokens. However, you requested ${prompt + asked} tokens (${prompt} in the messages, ${asked} in the completion). Please reduce the length of the messages or completion.`,
        type: 'BadRequestError',
        param: null,
        code: 400,
      });
    }
    const { usage: _usage, ...answer } = completion('s'.repeat(Math.min(200, asked * 4)));
    return json(res, 200, answer);
  });
}

const fit = (windowTokens: number): CallFit => (tokens) => Math.floor((windowTokens - tokens) * 4 * 0.9);
const said = (text: string): Rendered => ({ who: 'user', text, calls: [] });
const middle = Array.from({ length: 12 }, (_, i) => said(`message ${i} `.repeat(100)));

function settings(over: Partial<SummarizerSettings> = {}): SummarizerSettings {
  return {
    url: upstream.baseUrl,
    model: 'm',
    headers: {},
    wire: chat.summarizer,
    request: { model: 'm', messages: [], max_tokens: 256 },
    timeoutMs: 10_000,
    maxInputTokens: 60_000,
    maxSummaryTokens: 2_000,
    maxCalls: 16,
    maxInputBytes: 4 * 1024 * 1024,
    dispatcher,
    ...over,
  };
}

describe('a known window', () => {
  it('every call fits it, the completion asked for included: no refusal, a summary', async () => {
    upstream = await windowed();
    const result = await summarize(middle, settings({ callFit: fit(WINDOW) }), new AbortController().signal);
    expect(result.text).toMatch(/^s+$/);
    expect(upstream.received.length).toBeGreaterThan(1);
    for (const call of upstream.received) {
      expect(Math.ceil(call.body.length / 4) + call.json.max_tokens).toBeLessThanOrEqual(WINDOW);
    }
    // The answers said nothing of their tokens: estimated, and labelled so.
    expect(result.tokens).toMatchObject({ estimated: true });
    expect(result.tokens.input).toBeGreaterThan(0);
  });

  it('a window too small for the instructions and any summary: `overlong`, without a call', async () => {
    upstream = await windowed(400);
    const err = await summarize(middle, settings({ callFit: fit(400) }), new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SummarizerError);
    expect(err).toMatchObject({ kind: 'overlong', calls: 0 });
    expect(upstream.received).toHaveLength(0);
  });
});

describe('an unknown window, refused', () => {
  it('the refusal teaches it: the run is chunked again and ends with a summary', async () => {
    upstream = await windowed();
    const lessons: number[] = [];
    const result = await summarize(
      middle,
      settings({
        refused: async (r) => {
          lessons.push(r.status);
          return r.status === 400 && r.body.includes('maximum context length') ? fit(WINDOW) : null;
        },
      }),
      new AbortController().signal,
    );
    expect(result.text).toMatch(/^s+$/);
    expect(lessons.length).toBeGreaterThanOrEqual(1);
    const accepted = upstream.received.filter((c) => Math.ceil(c.body.length / 4) + c.json.max_tokens <= WINDOW);
    expect(accepted.length).toBe(upstream.received.length - lessons.length);
  });

  it('a refusal that teaches nothing is a rejection (the digest, as before)', async () => {
    upstream = await windowed();
    const err = await summarize(middle, settings({ refused: async () => null }), new AbortController().signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'rejected' });
  });

  it('a lesson that fits the refused call no tighter ends the run at once, as `overlong`', async () => {
    upstream = await windowed();
    let asked = 0;
    const err = await summarize(middle, settings({ refused: async () => (asked++, () => 1_000_000) }), new AbortController().signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'overlong' });
    expect(asked).toBe(1);
  });

  it('a lesson that helps too little ends after two more runs, as `overlong`', async () => {
    upstream = await windowed();
    let asked = 0;
    // Each lesson a little tighter, never enough.
    const err = await summarize(middle, settings({ refused: async (r) => (asked++, () => r.bytes - 1) }), new AbortController().signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'overlong' });
    expect(asked).toBe(3);
  });

  it('once a call is refused for good, no other part is sent, and the ones in flight are cancelled', async () => {
    let seen = 0;
    upstream = await startFakeUpstream(async (req, res) => {
      seen++;
      // The first part is refused at once; the others take their time.
      if (/This is part 1 of/.test(req.json.messages[1].content)) return json(res, 401, { error: { message: 'invalid api key' } });
      await new Promise((r) => setTimeout(r, 300));
      return json(res, 200, completion('part'));
    });
    const many = Array.from({ length: 40 }, (_, i) => said(`message ${i} `.repeat(200)));
    const err = await summarize(many, settings({ maxInputTokens: 2_000, maxSummaryTokens: 200 }), new AbortController().signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'rejected' });
    await new Promise((r) => setTimeout(r, 600));
    // Four at a time: the refused part and the three beside it; nothing after.
    expect(seen).toBeLessThanOrEqual(4);
  });
});
