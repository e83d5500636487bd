import { describe, expect, it } from 'vitest';
import { COMBINE_NOTE, DEFAULT_SUMMARY_PROMPT, TRANSCRIPT_RULES } from '../../src/compaction/prompt.js';
import { formatCount } from '../../src/compaction/shrink.js';
import { summarize, type SummarySettings } from '../../src/compaction/summary-pass.js';
import { SummarizerError, type CallFit, type Summarizer } from '../../src/compaction/summarizer-port.js';
import { chat } from '../../src/dialects/chat.js';
import type { Rendered } from '../../src/dialects/types.js';
import {
  chatAnswer,
  deadlineAfter,
  fakeSummarizer,
  hanging,
  type FakeSummarizer,
  type Scripted,
  type SentCall,
} from './fake-summarizer.js';

/*
 * summarize(), the map-reduce over a plain summarizer function (fake-summarizer.ts; the rescue's
 * real one is test/rescue/summarizer-client.test.ts): what each call carries (one call, or the parts of a
 * long middle and then their combination), what comes back, how each way it can fail is named (the
 * header's `summarizer=` and the fallback's reason); sized to the summarizer model's window, where
 * a refusal as overlong teaches it; and within its cost cap (maxCalls, maxInputBytes).
 */

function settings(over: Partial<SummarySettings> = {}): SummarySettings {
  return {
    request: { model: 'm', messages: [] },
    deadline: deadlineAfter(10_000),
    maxInputTokens: 100_000,
    maxSummaryTokens: 1_000,
    maxCalls: 16,
    maxInputBytes: 4 * 1024 * 1024,
    ...over,
  };
}

const said = (who: string, text: string, calls: Rendered['calls'] = []): Rendered => ({ who, text, calls });
/** The transcript of one summarizer call: the user message of the chat request. */
const transcriptOf = (c: SentCall): string => c.json.messages[1].content;
const answering = (answer: (call: SentCall) => Scripted | Promise<Scripted>, more: Partial<Summarizer> = {}): FakeSummarizer =>
  fakeSummarizer(chat.summarizer, answer, more);
const run = (items: Rendered[], s: SummarySettings, summarizer: Summarizer, previous?: string) => summarize(items, s, summarizer, previous);

async function failure(promise: Promise<unknown>): Promise<SummarizerError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SummarizerError);
  return err as SummarizerError;
}

describe('one summarizer call', () => {
  it('writes the transcript in the summarizer API, asks for the summary size, and returns the trimmed text with the tokens the answer reports', async () => {
    const summarizer = answering(() => chatAnswer('  The user wants the bug fixed.\n'));
    const items = [said('user', 'Fix the bug'), said('assistant', '', [{ id: 'c1', name: 'read_file', args: '{"path":"a.ts"}' }])];
    const result = await run(items, settings({ request: { model: 'm', max_completion_tokens: 5 } }), summarizer);
    expect(result).toEqual({
      text: 'The user wants the bug fixed.',
      calls: 1,
      tokens: { input: 12, output: 3, estimated: false },
      digested: 0,
    });
    expect(summarizer.calls).toHaveLength(1);
    const [call] = summarizer.calls;
    expect(call).toMatchObject({ kind: 'summary', maxTokens: 1_000 });
    expect(call.json).toEqual({
      model: 'summarizer-model',
      messages: [
        { role: 'system', content: `${DEFAULT_SUMMARY_PROMPT}\n\n${TRANSCRIPT_RULES}` },
        {
          role: 'user',
          content: '<conversation>\n[user]\n  Fix the bug\n\n[assistant]\n  -> calls read_file({"path":"a.ts"}) [c1]\n</conversation>',
        },
      ],
      max_completion_tokens: 1_000,
      stream: false,
    });
  });

  it('uses a configured prompt (the transcript layout rules after it)', async () => {
    const summarizer = answering(() => chatAnswer('ok'));
    await run([said('user', 'hi')], settings({ prompt: 'Summarise tersely.' }), summarizer);
    expect(summarizer.calls[0].json.messages[0]).toEqual({ role: 'system', content: `Summarise tersely.\n\n${TRANSCRIPT_RULES}` });
  });

  it('extends an earlier summary: it goes first in the transcript, before the new messages', async () => {
    const summarizer = answering(() => chatAnswer('merged'));
    const result = await run([said('user', 'and the docs')], settings(), summarizer, 'Fixed the bug in a.ts.');
    expect(result).toMatchObject({ text: 'merged', calls: 1 });
    expect(transcriptOf(summarizer.calls[0])).toBe(
      '<conversation>\n[summary of the earlier conversation]\n  Fixed the bug in a.ts.\n\n[user]\n  and the docs\n</conversation>',
    );
  });
});

describe('nothing readable', () => {
  it('an empty transcript is still one call (all the condensed items were opaque)', async () => {
    const summarizer = answering(() => chatAnswer('nothing to say'));
    expect(await run([], settings(), summarizer)).toMatchObject({ text: 'nothing to say', calls: 1 });
    expect(transcriptOf(summarizer.calls[0])).toBe('<conversation>\n\n</conversation>');
  });
});

describe('a middle longer than the summarizer reads at once', () => {
  /** Answers each part with a short summary naming it, and the combination with "ALL". */
  function partsSummarizer(partAnswer = (n: number) => `summary of part ${n}`): FakeSummarizer {
    return answering((call) => {
      const part = /^<conversation>\nThis is part (\d+) of (\d+) of the conversation, in order\. Summarise only this part\.\n\n/.exec(
        transcriptOf(call),
      );
      return chatAnswer(part ? partAnswer(Number(part[1])) : 'ALL');
    });
  }

  it('summarises each part, in order and numbered, then combines the part summaries in one more call', async () => {
    const summarizer = partsSummarizer();
    // 9,000 chars of budget ((4,000 - 1,000) tokens at 3 chars, less 4,000): two 2,007-char items a part.
    const items = ['a', 'b', 'c', 'd'].map((c) => said('user', c.repeat(2_000)));
    const result = await run(items, settings({ maxInputTokens: 4_000, maxSummaryTokens: 1_000 }), summarizer);
    expect(result).toMatchObject({ text: 'ALL', calls: 3 });
    const transcripts = summarizer.calls.map(transcriptOf);
    expect(transcripts.slice(0, 2).sort()).toEqual([
      `<conversation>\nThis is part 1 of 2 of the conversation, in order. Summarise only this part.\n\n[user]\n  ${'a'.repeat(2_000)}\n\n[user]\n  ${'b'.repeat(2_000)}\n</conversation>`,
      `<conversation>\nThis is part 2 of 2 of the conversation, in order. Summarise only this part.\n\n[user]\n  ${'c'.repeat(2_000)}\n\n[user]\n  ${'d'.repeat(2_000)}\n</conversation>`,
    ]);
    expect(transcripts[2]).toBe(
      `<conversation>\n${COMBINE_NOTE}\n\n[summary 1 of 2]\n  summary of part 1\n\n[summary 2 of 2]\n  summary of part 2\n</conversation>`,
    );
  });

  it('an item longer than half the window is shown by its ends, with how much was left out', async () => {
    const summarizer = answering(() => chatAnswer('short'));
    const text = `${'<'.repeat(700)}${'>'.repeat(800)}`;
    await run([said('user', text)], settings({ maxInputTokens: 1_000, maxSummaryTokens: 500 }), summarizer);
    // 1,000 escaped bytes at most an item: "[user]\n" takes 8, the marker 42 (each "\n" is two,
    // and its lines are indented as the content is), each end 475 of what is left (the first
    // starting with the indent).
    expect(transcriptOf(summarizer.calls[0])).toBe(
      `<conversation>\n[user]\n  ${'<'.repeat(473)}\n  [... 552 characters left out ...]\n  ${'>'.repeat(475)}\n</conversation>`,
    );
  });

  it('at the smallest window, parts of 2,000 chars; summaries too long to combine at once are combined in rounds', async () => {
    // Each part summary is 1,500 chars: two do not fit one 2,000-char call, so a second round
    // combines them one by one (with the combine note), and a last call merges the three.
    const summarizer = answering((call) => {
      const text = transcriptOf(call);
      const part = /This is part (\d+) of 3/.exec(text);
      if (part) return chatAnswer(`${part[1]}`.repeat(1_500));
      const round2 = new RegExp(
        `^<conversation>\\n${COMBINE_NOTE.replace(/[.]/g, '\\.')}\\n\\n\\[summary \\d of 3\\]\\n  (\\d)\\1{1499}\\n</conversation>$`,
      ).exec(text);
      return chatAnswer(round2 ? `merged ${round2[1]}` : 'ALL');
    });
    const items = ['a', 'b', 'c', 'd', 'e'].map((c) => said('user', c.repeat(700)));
    const result = await run(items, settings({ maxInputTokens: 1_000, maxSummaryTokens: 500 }), summarizer);
    expect(result).toMatchObject({ text: 'ALL', calls: 7 });
    const transcripts = summarizer.calls.map(transcriptOf);
    expect(
      transcripts
        .slice(0, 3)
        .map((t) => /This is part (\d) of 3/.exec(t)?.[1])
        .sort(),
    ).toEqual(['1', '2', '3']);
    expect(transcripts.at(-1)).toBe(
      `<conversation>\n${COMBINE_NOTE}\n\n[summary 1 of 3]\n  merged 1\n\n[summary 2 of 3]\n  merged 2\n\n[summary 3 of 3]\n  merged 3\n</conversation>`,
    );
  });

  it('runs at most four calls at once, and four when there are more parts', async () => {
    // Each part's call is held until all six are waiting, or until four are and no other one
    // came for 200 ms: six calls at once are all seen waiting together; four at most never more.
    const waiting: Array<() => void> = [];
    let quiet: NodeJS.Timeout | undefined;
    let arrived = 0;
    let peak = 0;
    const release = () => {
      for (const go of waiting.splice(0)) go();
    };
    const summarizer = answering(async (call) => {
      if (!/This is part/.test(transcriptOf(call))) return chatAnswer('ALL');
      arrived++;
      await new Promise<void>((resolve) => {
        waiting.push(resolve);
        peak = Math.max(peak, waiting.length);
        clearTimeout(quiet);
        if (arrived === 6) release();
        else if (waiting.length >= 4) quiet = setTimeout(release, 200);
      });
      return chatAnswer('part');
    });
    // Items of exactly half the 2,000-char window once rendered: one a part.
    const items = ['a', 'b', 'c', 'd', 'e', 'f'].map((c) => said('user', c.repeat(993)));
    // (Fewer than four at once would wait forever: the run's deadline ends it.)
    const result = await run(items, settings({ maxInputTokens: 1_000, maxSummaryTokens: 500, deadline: deadlineAfter(5_000) }), summarizer);
    expect(result).toMatchObject({ text: 'ALL', calls: 7 });
    expect(arrived).toBe(6);
    expect(peak).toBe(4);
  });
});

describe('how a failure is named', () => {
  it('an error status is "rejected", with the status and the start of the answer, and the refusal as it came back', async () => {
    const summarizer = answering(() => ({ status: 400, text: 'e'.repeat(400) }));
    const err = await failure(run([said('user', 'hi')], settings(), summarizer));
    expect(err.kind).toBe('rejected');
    expect(err.message).toBe(`summarizer answered 400: ${'e'.repeat(300)}`);
    expect(err.calls).toBe(1);
    expect(err.refusal).toEqual({ status: 400, body: 'e'.repeat(400), bytes: summarizer.calls[0].body.length, maxTokens: 1_000 });
  });

  it('an answer with no text is a "bad_response": not JSON, or blank', async () => {
    const notJson = await failure(
      run(
        [said('user', 'hi')],
        settings(),
        answering(() => ({ text: `not json ${'x'.repeat(400)}` })),
      ),
    );
    expect(notJson.kind).toBe('bad_response');
    expect(notJson.message).toBe(`summarizer answer had no text: not json ${'x'.repeat(291)}`);
    expect(
      (
        await failure(
          run(
            [said('user', 'hi')],
            settings(),
            answering(() => chatAnswer(' \n ')),
          ),
        )
      ).kind,
    ).toBe('bad_response');
  });

  it('no answer before the deadline is a "timeout", however the call ended', async () => {
    const summarizer = answering(hanging);
    const started = performance.now();
    const err = await failure(run([said('user', 'hi')], settings({ deadline: deadlineAfter(100) }), summarizer));
    expect(err.kind).toBe('timeout');
    expect(err.message).toBe('the summarizer did not answer in time');
    expect(err.calls).toBe(1);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(summarizer.calls[0].signal.aborted).toBe(true);
  });

  it('the summarizer\u2019s own naming is kept: `aborted` (the client left) ends the run as such, with the calls made', async () => {
    const err = await failure(
      run(
        [said('user', 'hi')],
        settings(),
        answering(() => {
          throw new SummarizerError('aborted', 'the client went away', 0);
        }),
      ),
    );
    expect(err).toMatchObject({ kind: 'aborted', message: 'the client went away', calls: 1 });
    const unreachable = await failure(
      run(
        [said('user', 'hi')],
        settings(),
        answering(() => {
          throw new SummarizerError('unreachable', 'the summarizer could not be reached (ECONNREFUSED)', 0);
        }),
      ),
    );
    expect(unreachable).toMatchObject({ kind: 'unreachable', message: 'the summarizer could not be reached (ECONNREFUSED)', calls: 1 });
  });
});

describe('sized to the summarizer\u2019s window', () => {
  const WINDOW = 1_500;
  /** A vLLM-like summarizer: 4 bytes a token, the completion counted; answers within max_tokens, without usage. */
  function windowed(windowTokens = WINDOW, more: Partial<Summarizer> = {}): FakeSummarizer {
    return answering((call) => {
      const prompt = Math.ceil(call.body.length / 4);
      const asked = Number(call.json.max_tokens ?? 0);
      if (prompt + asked > windowTokens) {
        return {
          status: 400,
          json: {
            object: 'error',
            message: `This model's maximum context length is ${windowTokens} tokens. However, you requested ${prompt + asked} tokens (${prompt} in the messages, ${asked} in the completion). Please reduce the length of the messages or completion.`,
            type: 'BadRequestError',
            param: null,
            code: 400,
          },
        };
      }
      const { usage: _usage, ...answer } = chatAnswer('s'.repeat(Math.min(200, asked * 4))).json as Record<string, unknown>;
      return { json: answer };
    }, more);
  }

  const fit =
    (windowTokens: number): CallFit =>
    (tokens) =>
      Math.floor((windowTokens - tokens) * 4 * 0.9);
  const middle = Array.from({ length: 12 }, (_, i) => said('user', `message ${i} `.repeat(100)));

  const windowSettings = (over: Partial<SummarySettings> = {}) =>
    settings({ request: { model: 'm', messages: [], max_tokens: 256 }, maxInputTokens: 60_000, maxSummaryTokens: 2_000, ...over });

  describe('a known window', () => {
    it('every call fits it, the completion asked for included: no refusal, a summary', async () => {
      const summarizer = windowed(WINDOW, { callFit: fit(WINDOW) });
      const result = await summarize(middle, windowSettings(), summarizer);
      expect(result.text).toMatch(/^s+$/);
      expect(summarizer.calls.length).toBeGreaterThan(1);
      for (const call of summarizer.calls) {
        expect(Math.ceil(call.body.length / 4) + call.json.max_tokens).toBeLessThanOrEqual(WINDOW);
      }
      // The answers said nothing of their tokens: estimated, and labelled so.
      expect(result.tokens).toMatchObject({ estimated: true });
      expect(result.tokens.input).toBeGreaterThan(0);
    });

    it('a window too small for the instructions and any summary: `overlong`, without a call', async () => {
      const summarizer = windowed(400, { callFit: fit(400) });
      const err = await summarize(middle, windowSettings(), summarizer).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SummarizerError);
      expect(err).toMatchObject({ kind: 'overlong', calls: 0 });
      expect(summarizer.calls).toHaveLength(0);
    });
  });

  describe('an unknown window, refused', () => {
    it('the refusal teaches it: the run is chunked again and ends with a summary', async () => {
      const lessons: number[] = [];
      const summarizer = windowed(WINDOW, {
        refused: async (r) => {
          lessons.push(r.status);
          return r.status === 400 && r.body.includes('maximum context length') ? fit(WINDOW) : null;
        },
      });
      const result = await summarize(middle, windowSettings(), summarizer);
      expect(result.text).toMatch(/^s+$/);
      expect(lessons.length).toBeGreaterThanOrEqual(1);
      const accepted = summarizer.calls.filter((c) => Math.ceil(c.body.length / 4) + c.json.max_tokens <= WINDOW);
      expect(accepted.length).toBe(summarizer.calls.length - lessons.length);
    });

    it('a refusal that teaches nothing is a rejection (the digest, as before)', async () => {
      const err = await summarize(middle, windowSettings(), windowed(WINDOW, { refused: async () => null })).catch((e: unknown) => e);
      expect(err).toMatchObject({ kind: 'rejected' });
    });

    it('a lesson that fits the refused call no tighter ends the run at once, as `overlong`', async () => {
      let asked = 0;
      const err = await summarize(middle, windowSettings(), windowed(WINDOW, { refused: async () => (asked++, () => 1_000_000) })).catch(
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ kind: 'overlong' });
      expect(asked).toBe(1);
    });

    it('a lesson that helps too little ends after two more runs, as `overlong`', async () => {
      let asked = 0;
      // Each lesson a little tighter, never enough.
      const err = await summarize(middle, windowSettings(), windowed(WINDOW, { refused: async (r) => (asked++, () => r.bytes - 1) })).catch(
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ kind: 'overlong' });
      expect(asked).toBe(3);
    });

    it('once a call is refused for good, no other part is sent, and the ones in flight are cancelled', async () => {
      const summarizer = answering(async (call) => {
        // The first part is refused at once; the others take their time (until they are cancelled).
        if (/This is part 1 of/.test(transcriptOf(call))) return { status: 401, json: { error: { message: 'invalid api key' } } };
        return hanging(call);
      });
      const many = Array.from({ length: 40 }, (_, i) => said('user', `message ${i} `.repeat(200)));
      const err = await summarize(many, windowSettings({ maxInputTokens: 2_000, maxSummaryTokens: 200 }), summarizer).catch(
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ kind: 'rejected' });
      await new Promise((r) => setTimeout(r, 300));
      // Four at a time: the refused part and the three beside it, cancelled; nothing after.
      expect(summarizer.calls.length).toBeGreaterThan(1);
      expect(summarizer.calls.length).toBeLessThanOrEqual(4);
      expect(summarizer.calls.every((c) => c.signal.aborted)).toBe(true);
    });
  });
});

describe('within its cost cap', () => {
  // 2,000 bytes of transcript a call: parts of two items.
  const capSettings = (over: Partial<SummarySettings> = {}) =>
    settings({ request: { model: 'm', messages: [] }, maxInputTokens: 1_000, maxSummaryTokens: 500, ...over });
  const capped = (n: number) =>
    Array.from({ length: n }, (_, i) =>
      said('tool result', `item ${i} `.repeat(90), i % 2 ? [] : [{ id: `c${i}`, name: 'read_file', args: '{}' }]),
    );
  const bytesOf = (calls: SentCall[]) => calls.reduce((sum, c) => sum + Buffer.byteLength(c.body), 0);
  const readItems = (calls: SentCall[]) =>
    [...new Set(calls.flatMap((c) => [...transcriptOf(c).matchAll(/ {2}item (\d+) /g)].map((m) => Number(m[1]))))].sort((a, b) => a - b);

  describe('summaries that never shrink', () => {
    it('are merged in one last call, shortened, once another round would pass maxCalls', async () => {
      // Every answer is as long as a part: merging them round after round would never end.
      const summarizer = answering(() => chatAnswer('S'.repeat(1_900)));
      const result = await summarize(capped(12), capSettings({ maxCalls: 10 }), summarizer);
      expect(summarizer.calls.length).toBeLessThanOrEqual(10);
      expect(result.calls).toBe(summarizer.calls.length);
      const last = transcriptOf(summarizer.calls.at(-1)!);
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
      const summarizer = answering(() => chatAnswer('SUMMARY'));
      const result = await summarize(capped(40), capSettings({ maxCalls: 5 }), summarizer, 'The earlier summary.');
      expect(summarizer.calls.length).toBeLessThanOrEqual(5);
      const read = readItems(summarizer.calls);
      expect(read.at(-1)).toBe(39);
      expect(read).toEqual(Array.from({ length: read.length }, (_, i) => read[0] + i));
      expect(result.digested).toBe(read[0]);
      // Items 0, 2, 4, ... call read_file: the digest counts the calls among the oldest, and a
      // quarter of their characters as tokens.
      const oldest = capped(40).slice(0, read[0]);
      const chars = oldest.reduce((n, item) => n + item.text.length + item.calls.reduce((m, c) => m + c.args.length, 0), 0);
      expect(result.text).toBe(
        `The oldest ${read[0]} messages (about ${formatCount(Math.round(chars / 4))} tokens) were past the summarizer's cost cap for one compaction and were condensed without a model summary; a mechanical digest of them:\n` +
          `Tool calls: ${Math.ceil(read[0] / 2)} (read_file ${Math.ceil(read[0] / 2)}).\nThe summary of the newer messages follows.\n\nSUMMARY`,
      );
      expect(transcriptOf(summarizer.calls[0])).toContain('[summary of the earlier conversation]\n  The earlier summary.');
    });

    it('within maxInputBytes, whatever maxCalls allows', async () => {
      const summarizer = answering(() => chatAnswer('SUMMARY'));
      const result = await summarize(capped(60), capSettings({ maxCalls: 100, maxInputBytes: 30_000 }), summarizer);
      expect(bytesOf(summarizer.calls)).toBeLessThanOrEqual(30_000);
      expect(result.digested).toBeGreaterThan(0);
      expect(readItems(summarizer.calls).at(-1)).toBe(59);
    });

    it('none when the cap is under a single call: `overlong`, with no call made', async () => {
      const summarizer = answering(() => chatAnswer('SUMMARY'));
      const err = await summarize(capped(3), capSettings({ maxInputBytes: 1_000 }), summarizer).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SummarizerError);
      expect(err).toMatchObject({
        kind: 'overlong',
        calls: 0,
        message: "the summarizer's cost cap for one compaction (16 calls, 1000 bytes) leaves no room for a call",
      });
      expect(summarizer.calls).toHaveLength(0);
    });

    it('all of them when they fit: nothing digested', async () => {
      const summarizer = answering(() => chatAnswer('SUMMARY'));
      const result = await summarize(capped(6), capSettings(), summarizer);
      expect(result).toMatchObject({ text: 'SUMMARY', digested: 0 });
      expect(readItems(summarizer.calls)).toEqual([0, 1, 2, 3, 4, 5]);
    });
  });
});
