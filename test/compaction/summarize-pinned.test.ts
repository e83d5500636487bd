import type { ServerResponse } from 'node:http';
import { Agent } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { COMBINE_NOTE, DEFAULT_SUMMARY_PROMPT, TRANSCRIPT_RULES } from '../../src/compaction/prompt.js';
import { SummarizerError, summarize, type SummarizerSettings } from '../../src/compaction/summarize.js';
import { chat } from '../../src/dialects/chat.js';
import type { Rendered } from '../../src/dialects/types.js';
import { completion, json, startFakeUpstream, type FakeUpstream, type Received } from '../helpers/fake-upstream.js';

/*
 * summarize() against a fake summarizer on a loopback socket: what the summarizer is sent (one
 * call, or the parts of a long middle and then their combination), what comes back, and how each
 * way it can fail is named (the header's `summarizer=` and the fallback's reason).
 */

let upstream: FakeUpstream;
const dispatcher = new Agent();
afterAll(() => dispatcher.close());
afterEach(async () => {
  await upstream?.close();
});

function settings(over: Partial<SummarizerSettings> = {}): SummarizerSettings {
  return {
    url: `${upstream.baseUrl}//`,
    model: 'summarizer-model',
    headers: { authorization: 'Bearer sk-summarizer' },
    wire: chat.summarizer,
    request: { model: 'm', messages: [] },
    timeoutMs: 10_000,
    maxInputTokens: 100_000,
    maxSummaryTokens: 1_000,
    maxCalls: 16,
    maxInputBytes: 4 * 1024 * 1024,
    dispatcher,
    ...over,
  };
}

const said = (who: string, text: string, calls: Rendered['calls'] = []): Rendered => ({ who, text, calls });
/** The transcript of one summarizer call: the user message of the chat request. */
const transcriptOf = (r: Received): string => r.json.messages[1].content;
const run = (items: Rendered[], s: SummarizerSettings, previous?: string, signal = new AbortController().signal) => summarize(items, s, signal, previous);

async function failure(promise: Promise<unknown>): Promise<SummarizerError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SummarizerError);
  return err as SummarizerError;
}

describe('one summarizer call', () => {
  it('posts the transcript in the summarizer API, with its credentials and the summarizer mark, and returns the trimmed text', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('  The user wants the bug fixed.\n')));
    const items = [said('user', 'Fix the bug'), said('assistant', '', [{ id: 'c1', name: 'read_file', args: '{"path":"a.ts"}' }])];
    const result = await run(items, settings({ request: { model: 'm', max_completion_tokens: 5 } }));
    expect(result).toEqual({ text: 'The user wants the bug fixed.', calls: 1, tokens: { input: 12, output: 3, estimated: false }, digested: 0 });
    expect(upstream.received).toHaveLength(1);
    const [call] = upstream.received;
    expect(call.method).toBe('POST');
    expect(call.url).toBe('/v1/chat/completions');
    expect(call.headers).toMatchObject({
      'content-type': 'application/json',
      accept: 'application/json',
      'x-gateway-compaction': 'summarizer',
      authorization: 'Bearer sk-summarizer',
    });
    expect(call.json).toEqual({
      model: 'summarizer-model',
      messages: [
        { role: 'system', content: `${DEFAULT_SUMMARY_PROMPT}\n\n${TRANSCRIPT_RULES}` },
        { role: 'user', content: '<conversation>\n[user]\n  Fix the bug\n\n[assistant]\n  -> calls read_file({"path":"a.ts"}) [c1]\n</conversation>' },
      ],
      max_completion_tokens: 1_000,
      stream: false,
    });
  });

  it('uses a configured prompt (the transcript layout rules after it), and its own headers override the defaults', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('ok')));
    await run([said('user', 'hi')], settings({ prompt: 'Summarise tersely.', headers: { accept: 'application/x-custom' } }));
    const [call] = upstream.received;
    expect(call.json.messages[0]).toEqual({ role: 'system', content: `Summarise tersely.\n\n${TRANSCRIPT_RULES}` });
    expect(call.headers.accept).toBe('application/x-custom');
  });

  it('extends an earlier summary: it goes first in the transcript, before the new messages', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('merged')));
    const result = await run([said('user', 'and the docs')], settings(), 'Fixed the bug in a.ts.');
    expect(result).toMatchObject({ text: 'merged', calls: 1 });
    expect(transcriptOf(upstream.received[0])).toBe('<conversation>\n[summary of the earlier conversation]\n  Fixed the bug in a.ts.\n\n[user]\n  and the docs\n</conversation>');
  });
});

describe('nothing readable', () => {
  it('an empty transcript is still one call (all the condensed items were opaque)', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('nothing to say')));
    expect(await run([], settings())).toMatchObject({ text: 'nothing to say', calls: 1 });
    expect(transcriptOf(upstream.received[0])).toBe('<conversation>\n\n</conversation>');
  });
});

describe('a middle longer than the summarizer reads at once', () => {
  /** Answers each part with a short summary naming it, and the combination with "ALL". */
  function partsSummarizer(partAnswer = (n: number) => `summary of part ${n}`): (req: Received, res: ServerResponse) => void {
    return (req, res) => {
      const part = /^<conversation>\nThis is part (\d+) of (\d+) of the conversation, in order\. Summarise only this part\.\n\n/.exec(transcriptOf(req));
      json(res, 200, completion(part ? partAnswer(Number(part[1])) : 'ALL'));
    };
  }

  it('summarises each part, in order and numbered, then combines the part summaries in one more call', async () => {
    upstream = await startFakeUpstream(partsSummarizer());
    // 9,000 chars of budget ((4,000 - 1,000) tokens at 3 chars, less 4,000): two 2,007-char items a part.
    const items = ['a', 'b', 'c', 'd'].map((c) => said('user', c.repeat(2_000)));
    const result = await run(items, settings({ maxInputTokens: 4_000, maxSummaryTokens: 1_000 }));
    expect(result).toMatchObject({ text: 'ALL', calls: 3 });
    const transcripts = upstream.received.map(transcriptOf);
    expect(transcripts.slice(0, 2).sort()).toEqual([
      `<conversation>\nThis is part 1 of 2 of the conversation, in order. Summarise only this part.\n\n[user]\n  ${'a'.repeat(2_000)}\n\n[user]\n  ${'b'.repeat(2_000)}\n</conversation>`,
      `<conversation>\nThis is part 2 of 2 of the conversation, in order. Summarise only this part.\n\n[user]\n  ${'c'.repeat(2_000)}\n\n[user]\n  ${'d'.repeat(2_000)}\n</conversation>`,
    ]);
    expect(transcripts[2]).toBe(`<conversation>\n${COMBINE_NOTE}\n\n[summary 1 of 2]\n  summary of part 1\n\n[summary 2 of 2]\n  summary of part 2\n</conversation>`);
  });

  it('an item longer than half the window is shown by its ends, with how much was left out', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('short')));
    const text = `${'<'.repeat(700)}${'>'.repeat(800)}`;
    await run([said('user', text)], settings({ maxInputTokens: 1_000, maxSummaryTokens: 500 }));
    // 1,000 escaped bytes at most an item: "[user]\n" takes 8, the marker 42 (each "\n" is two,
    // and its lines are indented as the content is), each end 475 of what is left (the first
    // starting with the indent).
    expect(transcriptOf(upstream.received[0])).toBe(`<conversation>\n[user]\n  ${'<'.repeat(473)}\n  [... 552 characters left out ...]\n  ${'>'.repeat(475)}\n</conversation>`);
  });

  it('at the smallest window, parts of 2,000 chars; summaries too long to combine at once are combined in rounds', async () => {
    // Each part summary is 1,500 chars: two do not fit one 2,000-char call, so a second round
    // combines them one by one (with the combine note), and a last call merges the three.
    upstream = await startFakeUpstream((req, res) => {
      const text = transcriptOf(req);
      const part = /This is part (\d+) of 3/.exec(text);
      if (part) return json(res, 200, completion(`${part[1]}`.repeat(1_500)));
      const round2 = new RegExp(`^<conversation>\\n${COMBINE_NOTE.replace(/[.]/g, '\\.')}\\n\\n\\[summary \\d of 3\\]\\n  (\\d)\\1{1499}\\n</conversation>$`).exec(text);
      json(res, 200, completion(round2 ? `merged ${round2[1]}` : 'ALL'));
    });
    const items = ['a', 'b', 'c', 'd', 'e'].map((c) => said('user', c.repeat(700)));
    const result = await run(items, settings({ maxInputTokens: 1_000, maxSummaryTokens: 500 }));
    expect(result).toMatchObject({ text: 'ALL', calls: 7 });
    const transcripts = upstream.received.map(transcriptOf);
    expect(transcripts.slice(0, 3).map((t) => /This is part (\d) of 3/.exec(t)?.[1]).sort()).toEqual(['1', '2', '3']);
    expect(transcripts.at(-1)).toBe(`<conversation>\n${COMBINE_NOTE}\n\n[summary 1 of 3]\n  merged 1\n\n[summary 2 of 3]\n  merged 2\n\n[summary 3 of 3]\n  merged 3\n</conversation>`);
  });

  it('runs at most four calls at once, and four when there are more parts', async () => {
    // Each part's call is held until all six are waiting, or until four are and no other one
    // came for 200 ms: six calls at once are all seen waiting together; four at most never more.
    let waiting: Array<() => void> = [];
    let quiet: NodeJS.Timeout | undefined;
    let arrived = 0;
    let peak = 0;
    const release = () => {
      for (const go of waiting.splice(0)) go();
    };
    upstream = await startFakeUpstream(async (req, res) => {
      if (!/This is part/.test(transcriptOf(req))) return json(res, 200, completion('ALL'));
      arrived++;
      await new Promise<void>((resolve) => {
        waiting.push(resolve);
        peak = Math.max(peak, waiting.length);
        clearTimeout(quiet);
        if (arrived === 6) release();
        else if (waiting.length >= 4) quiet = setTimeout(release, 200);
      });
      json(res, 200, completion('part'));
    });
    // Items of exactly half the 2,000-char window once rendered: one a part.
    const items = ['a', 'b', 'c', 'd', 'e', 'f'].map((c) => said('user', c.repeat(993)));
    // (Fewer than four at once would wait forever: the run's deadline ends it.)
    const result = await run(items, settings({ maxInputTokens: 1_000, maxSummaryTokens: 500, timeoutMs: 5_000 }));
    expect(result).toMatchObject({ text: 'ALL', calls: 7 });
    expect(arrived).toBe(6);
    expect(peak).toBe(4);
  });
});

describe('how a failure is named', () => {
  it('an error status is "rejected", with the status and the start of the answer', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 400, 'e'.repeat(400)));
    const err = await failure(run([said('user', 'hi')], settings()));
    expect(err.kind).toBe('rejected');
    expect(err.message).toBe(`summarizer answered 400: ${'e'.repeat(300)}`);
    expect(err.calls).toBe(1);
  });

  it('an answer with no text is a "bad_response": not JSON, or blank', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, `not json ${'x'.repeat(400)}`));
    const notJson = await failure(run([said('user', 'hi')], settings()));
    expect(notJson.kind).toBe('bad_response');
    expect(notJson.message).toBe(`summarizer answer had no text: not json ${'x'.repeat(291)}`);
    upstream.handle((_req, res) => json(res, 200, completion(' \n ')));
    expect((await failure(run([said('user', 'hi')], settings()))).kind).toBe('bad_response');
  });

  it('an answer past max(64 KiB, 16 bytes a summary token) is a "bad_response"; one at the limit is read', async () => {
    const answerOf = (bytes: number) => {
      const empty = JSON.stringify(completion(''));
      return JSON.stringify(completion('s'.repeat(bytes - Buffer.byteLength(empty))));
    };
    let size = 65_536;
    upstream = await startFakeUpstream((_req, res) => json(res, 200, answerOf(size)));
    expect(await run([said('user', 'hi')], settings())).toMatchObject({ calls: 1 });
    size = 65_537;
    const over = await failure(run([said('user', 'hi')], settings()));
    expect(over.kind).toBe('bad_response');
    expect(over.message).toBe('summarizer answer exceeded 65536 bytes');
    expect(over.calls).toBe(1);
    // 5,000 summary tokens: 80,000 bytes are allowed.
    size = 80_000;
    expect((await run([said('user', 'hi')], settings({ maxSummaryTokens: 5_000 }))).text).toHaveLength(80_000 - Buffer.byteLength(JSON.stringify(completion(''))));
    size = 80_001;
    expect((await failure(run([said('user', 'hi')], settings({ maxSummaryTokens: 5_000 })))).message).toBe('summarizer answer exceeded 80000 bytes');
  });

  it('no answer within timeoutMs is a "timeout"', async () => {
    upstream = await startFakeUpstream(() => undefined);
    const err = await failure(run([said('user', 'hi')], settings({ timeoutMs: 100 })));
    expect(err.kind).toBe('timeout');
    expect(err.message).toBe('the summarizer did not answer in time');
    expect(err.calls).toBe(1);
  });

  it('the dispatcher giving up waiting for headers is a "timeout" too', async () => {
    upstream = await startFakeUpstream(() => undefined);
    const impatient = new Agent({ headersTimeout: 100 });
    const err = await failure(run([said('user', 'hi')], settings({ dispatcher: impatient })));
    await impatient.close();
    expect(err.kind).toBe('timeout');
  });

  it('the client going away is "aborted", whatever the call was doing', async () => {
    const client = new AbortController();
    upstream = await startFakeUpstream(() => client.abort());
    const err = await failure(run([said('user', 'hi')], settings(), undefined, client.signal));
    expect(err.kind).toBe('aborted');
    expect(err.message).toBe('the client went away');
  });

  it('an answer that stalls after its headers is a "timeout"; one whose connection drops is "unreachable"', async () => {
    upstream = await startFakeUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"choices":');
    });
    expect((await failure(run([said('user', 'hi')], settings({ timeoutMs: 100 })))).kind).toBe('timeout');
    upstream.handle((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"choices":', () => res.destroy());
    });
    const dropped = await failure(run([said('user', 'hi')], settings()));
    expect(dropped.kind).toBe('unreachable');
    expect(dropped.message).toBe('the summarizer could not be reached (UND_ERR_SOCKET)');
  });

  it('a summarizer that cannot be reached is "unreachable", with the cause', async () => {
    upstream = await startFakeUpstream();
    const closed = upstream.origin;
    await upstream.close();
    const err = await failure(run([said('user', 'hi')], settings({ url: closed })));
    expect(err.kind).toBe('unreachable');
    expect(err.message).toBe('the summarizer could not be reached (ECONNREFUSED)');
    expect(err.calls).toBe(1);
  });
});
