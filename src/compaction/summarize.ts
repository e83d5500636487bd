import type { Dispatcher } from 'undici';
import { discard } from '../upstream/body.js';
import { COMBINE_NOTE, DEFAULT_SUMMARY_PROMPT, PARTIAL_NOTE } from './prompt.js';
import type { Rendered, SummarizerWire } from '../dialects/types.js';
import { chunkTranscript, clipBytes, renderTranscript } from './transcript.js';

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
/** Rounds of combining; a run that has not converged by then is not going to. */
const MAX_ROUNDS = 8;

/**
 * Condenses `items` with one call in the summarizer's API. A middle larger than the
 * summarizer's input window is split into chunks that fit, each summarised, then combined
 * (map-reduce), so that even a 7 MB history compacts. The whole run shares one deadline. With a
 * previous summary, the result condenses it and the new messages together. Chunks fit what is
 * known of the summarizer's window; a call refused as overlong teaches it, and the run starts
 * again in smaller chunks (within the same deadline).
 */
export async function summarize(
  items: Rendered[],
  s: SummarizerSettings,
  signal: AbortSignal,
  previousSummary?: string,
): Promise<SummaryResult> {
  const { deadline, clear } = deadlineOf(signal, s.timeoutMs);
  const counter: Counter = { calls: 0, tokens: { input: 0, output: 0, estimated: false } };
  let settings = s;
  try {
    for (let round = 0; ; round++) {
      try {
        return { text: await mapReduce(items, settings, deadline, counter, previousSummary), calls: counter.calls, tokens: counter.tokens };
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

interface Counter {
  calls: number;
  tokens: SummarizerTokens;
}

/** One run at one chunking; its calls still in flight when it ends (one failed) are cancelled. */
async function mapReduce(items: Rendered[], s: SummarizerSettings, deadline: AbortSignal, counter: Counter, previousSummary?: string): Promise<string> {
  const run = new AbortController();
  try {
    return await chunked(items, s, AbortSignal.any([deadline, run.signal]), counter, previousSummary);
  } finally {
    run.abort();
  }
}

async function chunked(items: Rendered[], s: SummarizerSettings, deadline: AbortSignal, counter: Counter, previousSummary?: string): Promise<string> {
  const { budget, maxTokens } = sizing(s, counter);
  const settings = { ...s, maxSummaryTokens: maxTokens };
  const rendered = renderTranscript(items, Math.floor(budget / 2));
  // Incremental: the summarizer reads its earlier summary, never the messages it condensed.
  if (previousSummary) rendered.unshift(clipBytes(`[summary of the earlier conversation]\n${previousSummary}`, budget));
  let pieces = chunkTranscript(rendered, budget);
  let note: (i: number, n: number) => string = PARTIAL_NOTE;
  // Each round shrinks the material by about chunk-size / summary-size; it ends in a few rounds.
  for (let round = 0; pieces.length > 1; round++) {
    if (round >= MAX_ROUNDS) throw new SummarizerError('bad_response', `the summaries did not converge in ${MAX_ROUNDS} rounds`, counter.calls);
    const summaries = await mapLimited(pieces, PARALLEL_CALLS, (piece, i) => call(settings, `${note(i + 1, pieces.length)}\n\n${piece}`, deadline, counter));
    pieces = chunkTranscript(summaries.map((text) => clipBytes(text, budget)), budget);
    note = () => COMBINE_NOTE;
    if (pieces.length === 1) return call(settings, `${COMBINE_NOTE}\n\n${pieces[0]}`, deadline, counter);
  }
  return call(settings, pieces[0] ?? '', deadline, counter);
}

/**
 * How much transcript one call carries (JSON-escaped bytes) and the summary it asks for: within
 * `maxInputTokens`, and within what fits the summarizer's window where that is known, the
 * instructions, the longest note and the completion counted. In a tight window the summary asked
 * for shrinks until a chunk holds a few summaries' worth, or the window is too small for any.
 */
function sizing(s: SummarizerSettings, counter: Counter): { budget: number; maxTokens: number } {
  const byTokens = Math.max(2_000, (s.maxInputTokens - s.maxSummaryTokens) * CHARS_PER_TOKEN - 4_000);
  if (!s.callFit) return { budget: byTokens, maxTokens: s.maxSummaryTokens };
  const longestNote = [COMBINE_NOTE, PARTIAL_NOTE(9_999_999, 9_999_999)].reduce((a, b) => (a.length > b.length ? a : b));
  for (let tokens = s.maxSummaryTokens; tokens >= MIN_SUMMARY_TOKENS; tokens = Math.floor(tokens * 0.8)) {
    const overhead = Buffer.byteLength(JSON.stringify(callBody(s, `${longestNote}\n\n`, tokens)));
    const room = Math.min(byTokens, s.callFit(tokens) - overhead);
    if (room >= CHUNK_SUMMARIES * tokens * SUMMARY_BYTES_PER_TOKEN) return { budget: room, maxTokens: tokens };
  }
  throw new SummarizerError('overlong', "the summarizer model's window is too small for its instructions and a summary", counter.calls);
}

function callBody(s: SummarizerSettings, transcript: string, maxTokens: number): unknown {
  return s.wire.body({
    model: s.model,
    instructions: s.prompt ?? DEFAULT_SUMMARY_PROMPT,
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
  const url = new URL(`${s.url.replace(/\/+$/, '')}${path}`);
  const res = await s.dispatcher.request({
    origin: url.origin,
    path: url.pathname + url.search,
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', 'x-gateway-compaction': 'summarizer', ...s.headers },
    body,
    signal,
  });
  const text = await boundedText(res.body, limit, counter.calls);
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
  const counter: Counter = { calls: 0, tokens: { input: 0, output: 0, estimated: false } };
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
