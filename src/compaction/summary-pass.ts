import { cappedDigestText } from './fallback.js';
import { COMBINE_NOTE, DEFAULT_SUMMARY_PROMPT, PARTIAL_NOTE, TRANSCRIPT_RULES } from './prompt.js';
import type { Rendered, SummarizerWire } from '../dialects/types.js';
import { affordsRound, callSize, newestAffordable, type CallSize } from './call-budget.js';
import { SUMMARY_BYTES_PER_TOKEN } from './size.js';
import { chunkTranscript, clipBytes, entryBytes, INDENT, renderBlock, renderItem } from './transcript.js';
import { letOthersRun, mapInSlices } from '../lib/time-slice.js';
import { SummarizerError, type Summarizer, type SummarizerCall, type SummarizerTokens } from './summarizer-port.js';
import { tryParseJson } from '../lib/json.js';

export interface SummarySettings {
  request: Record<string, unknown>;
  /** One for the whole run, however many calls it makes. */
  deadline: AbortSignal;
  maxInputTokens: number;
  maxSummaryTokens: number;
  prompt?: string;
  /** Past this or maxInputBytes, the oldest items go to the deterministic digest instead. */
  maxCalls: number;
  maxInputBytes: number;
}

type Calls = SummarySettings & Summarizer;

export interface SummaryResult {
  text: string;
  calls: number;
  tokens: SummarizerTokens;
  digested: number;
}

const PARALLEL_CALLS = 4;
const RECHUNKS = 2;
/** A run that has not converged by then is not going to, and is merged in one call. */
const MAX_ROUNDS = 8;

/**
 * Map-reduce over chunks that fit the summarizer's window; a call refused as overlong teaches it, and
 * the run starts again in smaller chunks within the same deadline.
 */
export async function summarize(
  items: Rendered[],
  settings: SummarySettings,
  summarizer: Summarizer,
  previousSummary?: string,
): Promise<SummaryResult> {
  const { deadline } = settings;
  const counter = newCounter();
  const s: Calls = { ...settings, ...summarizer };
  let current = s;
  try {
    for (let round = 0; ; round++) {
      try {
        const run = await mapReduce(items, current, deadline, counter, previousSummary);
        return { text: withDigest(items.slice(0, run.from), run.text), calls: counter.calls, tokens: counter.tokens, digested: run.from };
      } catch (err) {
        const refusal = err instanceof SummarizerError && err.kind === 'rejected' ? err.refusal : undefined;
        // Before the lesson: the fit may read bounds the lesson updates.
        const before = refusal ? Math.min(refusal.bytes, current.callFit?.(refusal.maxTokens) ?? Infinity) : 0;
        const lesson = refusal && s.refused ? await s.refused(refusal) : null;
        if (!lesson) throw err;
        // A lesson that fits the refused call no tighter teaches nothing: the same calls would go again.
        const tighter = lesson(refusal!.maxTokens) < before;
        if (round >= RECHUNKS || !tighter)
          throw new SummarizerError('overlong', `the summarizer refused its call as too long ${round + 1} times`, counter.calls, {
            cause: err,
          });
        current = { ...current, callFit: lesson };
      }
    }
  } catch (err) {
    const failure = asSummarizerError(err, counter.calls);
    failure.tokens = counter.tokens;
    throw failure;
  }
}

interface Counter {
  calls: number;
  bytes: number;
  tokens: SummarizerTokens;
}

function newCounter(): Counter {
  return { calls: 0, bytes: 0, tokens: { input: 0, output: 0, estimated: false } };
}

interface Run {
  text: string;
  from: number;
}

function withDigest(oldest: Rendered[], text: string): string {
  if (oldest.length === 0) return text;
  const chars = oldest.reduce((sum, item) => sum + item.text.length + item.calls.reduce((n, c) => n + c.args.length, 0), 0);
  return `${cappedDigestText(oldest, chars)}\n\n${text}`;
}

/** Calls still in flight when it ends (one failed) are cancelled. */
async function mapReduce(items: Rendered[], s: Calls, deadline: AbortSignal, counter: Counter, previousSummary?: string): Promise<Run> {
  const run = new AbortController();
  try {
    return await chunked(items, s, AbortSignal.any([deadline, run.signal]), counter, previousSummary);
  } finally {
    run.abort();
  }
}

async function chunked(items: Rendered[], s: Calls, deadline: AbortSignal, counter: Counter, previousSummary?: string): Promise<Run> {
  const size = sizing(s, counter);
  const settings = { ...s, maxSummaryTokens: size.maxTokens };
  const perItem = Math.floor(size.budget / 2);
  const blocks = await mapInSlices(items, (item) => renderItem(item, perItem));
  const earlier = previousSummary ? [renderBlock('summary of the earlier conversation', previousSummary, size.budget)] : [];
  const left = { calls: s.maxCalls - counter.calls, bytes: s.maxInputBytes - counter.bytes };
  const sizes = await mapInSlices(blocks, entryBytes);
  const earlierSizes = earlier.map(entryBytes);
  const from = newestAffordable(sizes, earlierSizes, size, left);
  if (from === undefined) {
    throw new SummarizerError(
      'overlong',
      `the summarizer's cost cap for one compaction (${s.maxCalls} calls, ${s.maxInputBytes} bytes) leaves no room for a call`,
      counter.calls,
    );
  }
  const pieces = chunkTranscript([...earlier, ...blocks.slice(from)], size.budget, [...earlierSizes, ...sizes.slice(from)]);
  return { text: await condensePieces(pieces, settings, size, deadline, counter), from };
}

/** Rounds while the cap leaves room for a round and a last merge; then one last call merges shortened summaries. */
async function condensePieces(pieces: string[], s: Calls, c: CallSize, deadline: AbortSignal, counter: Counter): Promise<string> {
  if (pieces.length <= 1) return call(s, pieces[0] ?? '', deadline, counter);
  let note: (i: number, n: number) => string = PARTIAL_NOTE;
  for (let round = 1; ; round++) {
    const n = pieces.length;
    const summaries = await mapLimited(pieces, PARALLEL_CALLS, (piece, i) => call(s, `${note(i + 1, n)}\n\n${piece}`, deadline, counter));
    const blocks = summaries.map((text, i) => renderBlock(`summary ${i + 1} of ${n}`, text, c.budget));
    pieces = chunkTranscript(blocks, c.budget);
    note = () => COMBINE_NOTE;
    const left = { calls: s.maxCalls - counter.calls, bytes: s.maxInputBytes - counter.bytes };
    if (pieces.length > 1 && (round >= MAX_ROUNDS || !affordsRound(pieces, c, left))) pieces = [squeezed(blocks, c.budget)];
    if (pieces.length === 1) return call(s, `${COMBINE_NOTE}\n\n${pieces[0]}`, deadline, counter);
  }
}

function squeezed(blocks: string[], budget: number): string {
  const share = Math.floor(budget / blocks.length) - entryBytes('');
  const shortened = blocks.map((block) => clipBytes(block, share, INDENT));
  return clipBytes(shortened.join('\n\n'), budget, INDENT);
}

function sizing(s: Calls, counter: Counter): CallSize {
  const size = callSize(s, (tokens) => Buffer.byteLength(JSON.stringify(callBody(s, `${LONGEST_NOTE}\n\n`, tokens))));
  if (size) return size;
  throw new SummarizerError('overlong', "the summarizer model's window is too small for its instructions and a summary", counter.calls);
}

const LONGEST_NOTE = [COMBINE_NOTE, PARTIAL_NOTE(9_999_999, 9_999_999)].reduce((a, b) => (a.length > b.length ? a : b));

function callBody(s: Calls, transcript: string, maxTokens: number): unknown {
  return s.wire.body({
    model: s.model,
    instructions: `${s.prompt ?? DEFAULT_SUMMARY_PROMPT}\n\n${TRANSCRIPT_RULES}`,
    transcript: `<conversation>\n${transcript}\n</conversation>`,
    maxTokens,
    request: s.request,
  });
}

async function call(s: Calls, transcript: string, signal: AbortSignal, counter: Counter): Promise<string> {
  // Each call's body is written in a task of its own, not in one with the chunking and the other calls'.
  await letOthersRun();
  const body = JSON.stringify(callBody(s, transcript, s.maxSummaryTokens));
  const text = await post(s, { kind: 'summary', body, maxTokens: s.maxSummaryTokens }, signal, counter);
  const answer = tryParseJson(text);
  const content = summaryContent(s.wire, answer);
  count(counter, s.wire.usage(answer), body, content ?? '');
  if (!content) throw new SummarizerError('bad_response', `summarizer answer had no text: ${text.slice(0, 300)}`, counter.calls);
  return content;
}

function count(counter: Counter, usage: { input: number; output: number } | undefined, body: string, output: string): void {
  const t = counter.tokens;
  t.input += usage?.input ?? Math.ceil(Buffer.byteLength(body) / SUMMARY_BYTES_PER_TOKEN);
  t.output += usage?.output ?? Math.ceil(Buffer.byteLength(output) / SUMMARY_BYTES_PER_TOKEN);
  if (!usage) t.estimated = true;
}

async function post(s: Calls, call: SummarizerCall, signal: AbortSignal, counter: Counter): Promise<string> {
  counter.calls++;
  counter.bytes += Buffer.byteLength(call.body);
  let answer;
  try {
    answer = await s.send(call, signal);
  } catch (err) {
    throw asSummarizerError(err, counter.calls, signal);
  }
  if (answer.status >= 400) {
    // A refused call read nothing, but its input is spent as far as anyone can tell.
    count(counter, undefined, call.body, '');
    const refusal = { status: answer.status, body: answer.text, bytes: Buffer.byteLength(call.body), maxTokens: call.maxTokens };
    throw new SummarizerError('rejected', `summarizer answered ${answer.status}: ${answer.text.slice(0, 300)}`, counter.calls, { refusal });
  }
  return answer.text;
}

/** The wire items as they are, opaque ones included. */
export async function providerCompact(
  items: unknown[],
  settings: SummarySettings,
  summarizer: Summarizer,
): Promise<{ window: unknown[]; calls: number }> {
  const compact = summarizer.wire.compact;
  const counter = newCounter();
  if (!compact) throw new SummarizerError('rejected', 'the API has no compaction of its own', 0);
  const s: Calls = { ...settings, ...summarizer };
  try {
    const body = JSON.stringify(compact.body({ model: s.model, items, request: s.request }));
    const text = await post(s, { kind: 'compact', body, maxTokens: 0 }, s.deadline, counter);
    let window: unknown[] | undefined;
    try {
      window = compact.window(JSON.parse(text));
    } catch {
      window = undefined;
    }
    if (!window) throw new SummarizerError('bad_response', `compaction answer had no window: ${text.slice(0, 300)}`, counter.calls);
    return { window, calls: counter.calls };
  } catch (err) {
    throw asSummarizerError(err, counter.calls);
  }
}

function summaryContent(wire: SummarizerWire, answer: unknown): string | undefined {
  try {
    const content = wire.text(answer);
    return typeof content === 'string' && content.trim() ? content.trim() : undefined;
  } catch {
    return undefined;
  }
}

async function mapLimited<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    // Once one has failed the run is over: no worker takes another item.
    while (next < items.length && !failed) {
      const i = next++;
      try {
        results[i] = await fn(items[i], i);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** `timeout` once the run's deadline has ended it, whatever the call said. */
function asSummarizerError(err: unknown, calls: number, signal?: AbortSignal): SummarizerError {
  const timedOut = signal?.aborted === true && !(err instanceof SummarizerError && err.kind === 'aborted');
  if (timedOut) return new SummarizerError('timeout', 'the summarizer did not answer in time', calls, { cause: err });
  if (err instanceof SummarizerError)
    return signal ? new SummarizerError(err.kind, err.message, calls, { cause: err.cause, refusal: err.refusal, tokens: err.tokens }) : err;
  return new SummarizerError(
    'unreachable',
    `the summarizer could not be reached (${(err as { code?: string })?.code || (err as Error)?.message})`,
    calls,
    { cause: err },
  );
}
