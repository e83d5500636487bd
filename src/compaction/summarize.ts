import type { Dispatcher } from 'undici';
import { discard } from '../upstream/body.js';
import { cappedDigestText } from './fallback.js';
import { COMBINE_NOTE, DEFAULT_SUMMARY_PROMPT, PARTIAL_NOTE, TRANSCRIPT_RULES } from './prompt.js';
import type { Rendered, SummarizerWire } from '../dialects/types.js';
import { jsonTextBytes } from './size.js';
import { chunkTranscript, clipBytes, entryBytes, INDENT, renderBlock, renderItem } from './transcript.js';
import { mapInSlices } from '../time-slice.js';
import { traceSummarizerCall } from '../telemetry.js';

export interface SummarizerSettings {
  /** The API's base URL, e.g. https://api.openai.com/v1. */
  url: string;
  model: string;
  /** Headers that authenticate the call (never sent anywhere but `url`), and any the API requires. */
  headers: Record<string, string>;
  /** How a call is made in the summarizer's API (chat, responses or messages). */
  wire: SummarizerWire;
  /** The request being rescued: the summarizer call follows its conventions where the API has a choice. */
  request: Record<string, unknown>;
  timeoutMs: number;
  maxInputTokens: number;
  /** The most tokens one summary may take. */
  maxSummaryTokens: number;
  prompt?: string;
  /**
   * What one compaction may spend on the summarizer at most: calls (parts, merges, and runs
   * chunked again after a refusal), and bytes of call bodies sent. Past either, the oldest items
   * go to the deterministic digest instead.
   */
  maxCalls: number;
  maxInputBytes: number;
  dispatcher: Dispatcher;
  /**
   * The largest call body, in bytes, that asks for `maxTokens` and is known to fit the summarizer
   * model's window (where it is known: the summarizer is the upstream's own model).
   */
  callFit?: CallFit;
  /**
   * Reads a call the summarizer refused: when it was refused as overlong, what fits from now on
   * (the run is chunked again to it); null when it was refused for another reason.
   */
  refused?: (refusal: Refusal) => Promise<CallFit | null>;
}

export type CallFit = (maxTokens: number) => number;

/** A summarizer call's refusal, as it came back. */
export interface Refusal {
  status: number;
  body: string;
  /** The refused call's body size, and the completion it asked for. */
  bytes: number;
  maxTokens: number;
}

/** Tokens the summarizer's calls took: as their answers reported, or estimated where they did not. */
export interface SummarizerTokens {
  input: number;
  output: number;
  /** Part of those counts was estimated from sizes (an answer that reports no usage, or a failed call). */
  estimated: boolean;
}

export interface SummaryResult {
  text: string;
  calls: number;
  tokens: SummarizerTokens;
  /** The oldest items the cost cap left to the deterministic digest, which `text` starts with; 0 when none. */
  digested: number;
}

/**
 * Why a summary failed: `overlong` is the summarizer refusing its own call as too long even after
 * chunking to what it said, or a window too small for the instructions and a summary.
 */
export type SummarizerFailureKind = 'timeout' | 'unreachable' | 'rejected' | 'overlong' | 'bad_response' | 'aborted';

export class SummarizerError extends Error {
  constructor(
    readonly kind: SummarizerFailureKind,
    message: string,
    readonly calls: number,
    options?: { cause?: unknown; refusal?: Refusal; tokens?: SummarizerTokens },
  ) {
    super(message, options);
    this.refusal = options?.refusal;
    this.tokens = options?.tokens ?? { input: 0, output: 0, estimated: false };
  }
  readonly refusal?: Refusal;
  tokens: SummarizerTokens;
}

/** Characters per token assumed when sizing the summarizer's input: conservative for code and JSON. */
const CHARS_PER_TOKEN = 3;
/** Bytes one token of a summary takes, when estimating. */
const SUMMARY_BYTES_PER_TOKEN = 4;
/** At most this many summarizer calls run at once when a long middle is split into chunks. */
const PARALLEL_CALLS = 4;
/** A chunk holds at least this many summaries' worth of text, so that every round of combining shrinks. */
const CHUNK_SUMMARIES = 3;
/** The smallest summary asked for when a window is tight. */
const MIN_SUMMARY_TOKENS = 64;
/** A run refused as overlong is chunked again at most this many times. */
const RECHUNKS = 2;
/** Rounds of combining; a run that has not converged by then is not going to, and is merged in one call. */
const MAX_ROUNDS = 8;

/**
 * Condenses `items` with one call in the summarizer's API. A middle larger than the
 * summarizer's input window is split into chunks that fit, each summarised, then combined
 * (map-reduce), so that even a 7 MB history compacts. The whole run shares one deadline. With a
 * previous summary, the result condenses it and the new messages together. Chunks fit what is
 * known of the summarizer's window; a call refused as overlong teaches it, and the run starts
 * again in smaller chunks (within the same deadline). Every call counts against the cost cap
 * (`maxCalls`, `maxInputBytes`): the newest items the cap affords are summarised, and the oldest
 * beyond them get the deterministic digest, at the start of the text.
 */
export async function summarize(
  items: Rendered[],
  s: SummarizerSettings,
  signal: AbortSignal,
  previousSummary?: string,
): Promise<SummaryResult> {
  const { deadline, clear } = deadlineOf(signal, s.timeoutMs);
  const counter = newCounter();
  let settings = s;
  try {
    for (let round = 0; ; round++) {
      try {
        const run = await mapReduce(items, settings, deadline, counter, previousSummary);
        return { text: withDigest(items.slice(0, run.from), run.text), calls: counter.calls, tokens: counter.tokens, digested: run.from };
      } catch (err) {
        const refusal = err instanceof SummarizerError && err.kind === 'rejected' ? err.refusal : undefined;
        // (What fits now, before the lesson: the fit may read bounds the lesson updates.)
        const before = refusal ? Math.min(refusal.bytes, settings.callFit?.(refusal.maxTokens) ?? Infinity) : 0;
        const lesson = refusal && s.refused ? await s.refused(refusal) : null;
        if (!lesson) throw err;
        // A lesson that fits the refused call no tighter teaches nothing: the same calls would go again.
        const tighter = lesson(refusal!.maxTokens) < before;
        if (round >= RECHUNKS || !tighter) throw new SummarizerError('overlong', `the summarizer refused its call as too long ${round + 1} times`, counter.calls, { cause: err });
        settings = { ...settings, callFit: lesson };
      }
    }
  } catch (err) {
    const failure = asSummarizerError(err, signal, counter.calls);
    failure.tokens = counter.tokens;
    throw failure;
  } finally {
    clear();
  }
}

/** What a compaction's calls have spent so far: calls and body bytes sent, and their tokens. */
interface Counter {
  calls: number;
  bytes: number;
  tokens: SummarizerTokens;
}

function newCounter(): Counter {
  return { calls: 0, bytes: 0, tokens: { input: 0, output: 0, estimated: false } };
}

/** A run's summary, and where the items it read start (the ones before went to the digest). */
interface Run {
  text: string;
  from: number;
}

function withDigest(oldest: Rendered[], text: string): string {
  if (oldest.length === 0) return text;
  // A size for "about N tokens", without reading huge texts through once more.
  const chars = oldest.reduce((sum, item) => sum + item.text.length + item.calls.reduce((n, c) => n + c.args.length, 0), 0);
  return `${cappedDigestText(oldest, chars)}\n\n${text}`;
}

/** One run at one chunking; its calls still in flight when it ends (one failed) are cancelled. */
async function mapReduce(items: Rendered[], s: SummarizerSettings, deadline: AbortSignal, counter: Counter, previousSummary?: string): Promise<Run> {
  const run = new AbortController();
  try {
    return await chunked(items, s, AbortSignal.any([deadline, run.signal]), counter, previousSummary);
  } finally {
    run.abort();
  }
}

async function chunked(items: Rendered[], s: SummarizerSettings, deadline: AbortSignal, counter: Counter, previousSummary?: string): Promise<Run> {
  const size = sizing(s, counter);
  const settings = { ...s, maxSummaryTokens: size.maxTokens };
  // A hundred thousand turns are rendered and measured between time slices.
  const perItem = Math.floor(size.budget / 2);
  const blocks = await mapInSlices(items, (item) => renderItem(item, perItem));
  // Incremental: the summarizer reads its earlier summary, never the messages it condensed.
  const earlier = previousSummary ? [renderBlock('summary of the earlier conversation', previousSummary, size.budget)] : [];
  const left = { calls: s.maxCalls - counter.calls, bytes: s.maxInputBytes - counter.bytes };
  const sizes = await mapInSlices(blocks, entryBytes);
  const earlierSizes = earlier.map(entryBytes);
  const from = newestAffordable(sizes, earlierSizes, size, left);
  if (from === undefined) {
    throw new SummarizerError('overlong', `the summarizer's cost cap for one compaction (${s.maxCalls} calls, ${s.maxInputBytes} bytes) leaves no room for a call`, counter.calls);
  }
  const pieces = chunkTranscript([...earlier, ...blocks.slice(from)], size.budget, [...earlierSizes, ...sizes.slice(from)]);
  return { text: await condensePieces(pieces, settings, size, deadline, counter), from };
}

/**
 * The parts summarised (at most four calls at once), then their summaries merged, in rounds
 * while the cap leaves room for a round and a last merge; past that (or past MAX_ROUNDS), the
 * summaries are each shortened so that one last call merges them all.
 */
async function condensePieces(pieces: string[], s: SummarizerSettings, c: CallSize, deadline: AbortSignal, counter: Counter): Promise<string> {
  if (pieces.length <= 1) return call(s, pieces[0] ?? '', deadline, counter);
  let note: (i: number, n: number) => string = PARTIAL_NOTE;
  for (let round = 1; ; round++) {
    const n = pieces.length;
    const summaries = await mapLimited(pieces, PARALLEL_CALLS, (piece, i) => call(s, `${note(i + 1, n)}\n\n${piece}`, deadline, counter));
    const blocks = summaries.map((text, i) => renderBlock(`summary ${i + 1} of ${n}`, text, c.budget));
    pieces = chunkTranscript(blocks, c.budget);
    note = () => COMBINE_NOTE;
    if (pieces.length > 1 && (round >= MAX_ROUNDS || !affordsRound(pieces, c, s, counter))) pieces = [squeezed(blocks, c.budget)];
    if (pieces.length === 1) return call(s, `${COMBINE_NOTE}\n\n${pieces[0]}`, deadline, counter);
  }
}

/** Room for a round of merging these pieces, and for one last merge after it. */
function affordsRound(pieces: string[], c: CallSize, s: SummarizerSettings, counter: Counter): boolean {
  const bytes = pieces.reduce((sum, piece) => sum + jsonTextBytes(piece) + c.overhead, 0) + c.budget + c.overhead;
  return counter.calls + pieces.length + 1 <= s.maxCalls && counter.bytes + bytes <= s.maxInputBytes;
}

/** Summaries shortened to share one call: each its part of `budget`, the whole within it whatever. */
function squeezed(blocks: string[], budget: number): string {
  const share = Math.floor(budget / blocks.length) - entryBytes('');
  const shortened = blocks.map((block) => clipBytes(block, share, INDENT));
  return clipBytes(shortened.join('\n\n'), budget, INDENT);
}

/** One call's size: the transcript it carries, the summary it asks for, and the body around the transcript. */
interface CallSize {
  budget: number;
  maxTokens: number;
  overhead: number;
}

/**
 * Where the newest items one run can afford start, the earlier summary read first: the most
 * of them whose calls (parts and merges, as `runCost` counts them) are within what is `left`;
 * undefined when not even the newest one is.
 */
function newestAffordable(sizes: number[], earlier: number[], c: CallSize, left: { calls: number; bytes: number }): number | undefined {
  const fits = (chunks: Chunking) => {
    const cost = runCost(chunks, c);
    return cost.calls <= left.calls && cost.bytes <= left.bytes;
  };
  const withEarlier = (chunks: Chunking) => earlier.reduce((acc, bytes) => addOlder(acc, bytes, c.budget), chunks);
  if (sizes.length === 0) return fits(withEarlier(NO_CHUNKS)) ? 0 : undefined;
  // Chunked greedily from the newest end: as few chunks as chunking in order makes.
  let chunks = NO_CHUNKS;
  let from: number | undefined;
  for (let i = sizes.length - 1; i >= 0; i--) {
    chunks = addOlder(chunks, sizes[i], c.budget);
    if (!fits(withEarlier(chunks))) break;
    from = i;
  }
  return from;
}

interface Chunking {
  count: number;
  /** Bytes of the chunk being filled (the oldest), and of all. */
  fill: number;
  bytes: number;
}

const NO_CHUNKS: Chunking = { count: 0, fill: 0, bytes: 0 };

/** `chunks` with an older entry before them, by the rule of `chunkSizes`. */
function addOlder(chunks: Chunking, bytes: number, budget: number): Chunking {
  if (chunks.count === 0) return { count: 1, fill: bytes, bytes };
  if (chunks.fill + bytes > budget) return { count: chunks.count + 1, fill: bytes, bytes: chunks.bytes + bytes };
  return { count: chunks.count, fill: chunks.fill + bytes, bytes: chunks.bytes + bytes };
}

/**
 * The most a run over these chunks costs: one call for one chunk (or none); else a call a
 * chunk, and the rounds of merging their summaries, each merge call reckoned a full one.
 */
function runCost(chunks: Chunking, c: CallSize): { calls: number; bytes: number } {
  if (chunks.count <= 1) return { calls: 1, bytes: chunks.bytes + c.overhead };
  const merges = mergeCalls(chunks.count, summariesPerCall(c));
  return { calls: chunks.count + merges, bytes: chunks.bytes + chunks.count * c.overhead + merges * (c.budget + c.overhead) };
}

/** Calls that merge `n` summaries, `k` a call, round after round down to one. */
function mergeCalls(n: number, k: number): number {
  let calls = 0;
  for (let left = n; left > 1; ) {
    left = Math.ceil(left / k);
    calls += left;
  }
  return calls;
}

/** Summaries of the size asked for that one merge call holds (at least two, or merging never ends). */
function summariesPerCall(c: CallSize): number {
  const summary = c.maxTokens * SUMMARY_BYTES_PER_TOKEN + entryBytes('[summary 99 of 99]\n');
  return Math.max(2, Math.floor(c.budget / summary));
}

/**
 * How much transcript one call carries (JSON-escaped bytes) and the summary it asks for: within
 * `maxInputTokens`, and within what fits the summarizer's window where that is known, the
 * instructions, the longest note and the completion counted. In a tight window the summary asked
 * for shrinks until a chunk holds a few summaries' worth, or the window is too small for any.
 */
function sizing(s: SummarizerSettings, counter: Counter): CallSize {
  const byTokens = Math.max(2_000, (s.maxInputTokens - s.maxSummaryTokens) * CHARS_PER_TOKEN - 4_000);
  const overheadAt = (tokens: number) => Buffer.byteLength(JSON.stringify(callBody(s, `${LONGEST_NOTE}\n\n`, tokens)));
  if (!s.callFit) return { budget: byTokens, maxTokens: s.maxSummaryTokens, overhead: overheadAt(s.maxSummaryTokens) };
  for (let tokens = s.maxSummaryTokens; tokens >= MIN_SUMMARY_TOKENS; tokens = Math.floor(tokens * 0.8)) {
    const overhead = overheadAt(tokens);
    const room = Math.min(byTokens, s.callFit(tokens) - overhead);
    if (room >= CHUNK_SUMMARIES * tokens * SUMMARY_BYTES_PER_TOKEN) return { budget: room, maxTokens: tokens, overhead };
  }
  throw new SummarizerError('overlong', "the summarizer model's window is too small for its instructions and a summary", counter.calls);
}

const LONGEST_NOTE = [COMBINE_NOTE, PARTIAL_NOTE(9_999_999, 9_999_999)].reduce((a, b) => (a.length > b.length ? a : b));

function callBody(s: SummarizerSettings, transcript: string, maxTokens: number): unknown {
  return s.wire.body({
    model: s.model,
    instructions: `${s.prompt ?? DEFAULT_SUMMARY_PROMPT}\n\n${TRANSCRIPT_RULES}`,
    transcript: `<conversation>\n${transcript}\n</conversation>`,
    maxTokens,
    request: s.request,
  });
}

/**
 * The client's signal, and the whole run's deadline. A timer of our own, not AbortSignal.timeout:
 * on Node 20 that signal can be garbage-collected before it fires, and a stalled summarizer would
 * then hold the client forever.
 */
function deadlineOf(signal: AbortSignal, ms: number): { deadline: AbortSignal; clear: () => void } {
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(new DOMException('the summarizer did not answer in time', 'TimeoutError')), ms);
  return { deadline: AbortSignal.any([signal, timeout.signal]), clear: () => clearTimeout(timer) };
}

async function call(s: SummarizerSettings, transcript: string, signal: AbortSignal, counter: Counter): Promise<string> {
  const body = JSON.stringify(callBody(s, transcript, s.maxSummaryTokens));
  const text = await post(s, s.wire.path(s.model), body, signal, counter, answerLimit(s), s.maxSummaryTokens);
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    answer = undefined;
  }
  const content = summaryContent(s.wire, answer);
  count(counter, s.wire.usage(answer), body, content ?? '');
  if (!content) throw new SummarizerError('bad_response', `summarizer answer had no text: ${text.slice(0, 300)}`, counter.calls);
  return content;
}

/** Adds a call's tokens: what its answer reports, else estimated from the sizes. */
function count(counter: Counter, usage: { input: number; output: number } | undefined, body: string, output: string): void {
  const t = counter.tokens;
  t.input += usage?.input ?? Math.ceil(Buffer.byteLength(body) / SUMMARY_BYTES_PER_TOKEN);
  t.output += usage?.output ?? Math.ceil(Buffer.byteLength(output) / SUMMARY_BYTES_PER_TOKEN);
  if (!usage) t.estimated = true;
}

/** One POST to the summarizer's API, marked as the gateway's own; the answer's text, bounded. */
async function post(s: SummarizerSettings, path: string, body: string, signal: AbortSignal, counter: Counter, limit: number, maxTokens = 0): Promise<string> {
  counter.calls++;
  counter.bytes += Buffer.byteLength(body);
  const url = new URL(`${s.url.replace(/\/+$/, '')}${path}`);
  const headers = { 'content-type': 'application/json', accept: 'application/json', 'x-gateway-compaction': 'summarizer', ...s.headers };
  // A traced request's summarizer call is a span of its own, and carries its traceparent.
  const traced = traceSummarizerCall({ url, model: s.model, wire: s.wire, compact: path === s.wire.compact?.path, maxTokens }, headers);
  let res: Dispatcher.ResponseData;
  let text: string;
  try {
    res = await s.dispatcher.request({ origin: url.origin, path: url.pathname + url.search, method: 'POST', headers: traced?.headers ?? headers, body, signal });
    text = await boundedText(res.body, limit, counter.calls);
  } catch (err) {
    traced?.failed(err);
    throw err;
  }
  traced?.answered(res.statusCode, () => s.wire.usage(parsedAnswer(text)));
  if (res.statusCode >= 400) {
    // A refused call read nothing, but its input is spent as far as anyone can tell: estimated.
    count(counter, undefined, body, '');
    const refusal = { status: res.statusCode, body: text, bytes: Buffer.byteLength(body), maxTokens };
    throw new SummarizerError('rejected', `summarizer answered ${res.statusCode}: ${text.slice(0, 300)}`, counter.calls, { refusal });
  }
  return text;
}

/**
 * Condenses `items` with the provider's own compaction (one call, the wire items as they are,
 * opaque ones included): the window of items to splice in their place. Same deadline and errors
 * as a summary.
 */
export async function providerCompact(items: unknown[], s: SummarizerSettings, signal: AbortSignal, limit: number): Promise<{ window: unknown[]; calls: number }> {
  const compact = s.wire.compact;
  const counter = newCounter();
  if (!compact) throw new SummarizerError('rejected', 'the API has no compaction of its own', 0);
  const { deadline, clear } = deadlineOf(signal, s.timeoutMs);
  try {
    const text = await post(s, compact.path, JSON.stringify(compact.body({ model: s.model, items, request: s.request })), deadline, counter, limit);
    let window: unknown[] | undefined;
    try {
      window = compact.window(JSON.parse(text));
    } catch {
      window = undefined;
    }
    if (!window) throw new SummarizerError('bad_response', `compaction answer had no window: ${text.slice(0, 300)}`, counter.calls);
    return { window, calls: counter.calls };
  } catch (err) {
    throw asSummarizerError(err, signal, counter.calls);
  } finally {
    clear();
  }
}

function parsedAnswer(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A summary is a few thousand tokens; an answer far past that is not one. */
function answerLimit(s: SummarizerSettings): number {
  return Math.max(64 * 1024, s.maxSummaryTokens * 16);
}

async function boundedText(body: Dispatcher.ResponseData['body'], limit: number, calls: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      discard(body);
      throw new SummarizerError('bad_response', `summarizer answer exceeded ${limit} bytes`, calls);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
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

function asSummarizerError(err: unknown, clientSignal: AbortSignal, calls: number): SummarizerError {
  if (err instanceof SummarizerError) return err;
  if (clientSignal.aborted) return new SummarizerError('aborted', 'the client went away', calls, { cause: err });
  const name = (err as Error)?.name;
  const code = (err as { code?: string })?.code ?? '';
  if (name === 'TimeoutError' || name === 'AbortError' || code === 'UND_ERR_ABORTED' || code.includes('TIMEOUT')) {
    return new SummarizerError('timeout', 'the summarizer did not answer in time', calls, { cause: err });
  }
  return new SummarizerError('unreachable', `the summarizer could not be reached (${code || (err as Error)?.message})`, calls, {
    cause: err,
  });
}
