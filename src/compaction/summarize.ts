import type { Dispatcher } from 'undici';
import { discard } from '../upstream/body.js';
import { COMBINE_NOTE, DEFAULT_SUMMARY_PROMPT, PARTIAL_NOTE } from './prompt.js';
import type { Rendered, SummarizerWire } from '../dialects/types.js';
import { chunkTranscript, renderTranscript } from './transcript.js';

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
}

export interface SummaryResult {
  text: string;
  calls: number;
}

export type SummarizerFailureKind = 'timeout' | 'unreachable' | 'rejected' | 'bad_response' | 'aborted';

export class SummarizerError extends Error {
  constructor(
    readonly kind: SummarizerFailureKind,
    message: string,
    readonly calls: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Characters per token assumed when sizing the summarizer's input: conservative for code and JSON. */
const CHARS_PER_TOKEN = 3;
/** At most this many summarizer calls run at once when a long middle is split into chunks. */
const PARALLEL_CALLS = 4;

/**
 * Condenses `items` with one call in the summarizer's API. A middle larger than the
 * summarizer's input window is split into chunks that fit, each summarised, then combined
 * (map-reduce), so that even a 7 MB history compacts. The whole run shares one deadline. With a
 * previous summary, the result condenses it and the new messages together.
 */
export async function summarize(
  items: Rendered[],
  s: SummarizerSettings,
  signal: AbortSignal,
  previousSummary?: string,
): Promise<SummaryResult> {
  const { deadline, clear } = deadlineOf(signal, s.timeoutMs);
  const counter = { calls: 0 };
  const budget = Math.max(2_000, (s.maxInputTokens - s.maxSummaryTokens) * CHARS_PER_TOKEN - 4_000);
  const rendered = renderTranscript(items, Math.floor(budget / 2));
  // Incremental: the summarizer reads its earlier summary, never the messages it condensed.
  if (previousSummary) rendered.unshift(`[summary of the earlier conversation]\n${previousSummary}`);
  try {
    let pieces = chunkTranscript(rendered, budget);
    let note: (i: number, n: number) => string = PARTIAL_NOTE;
    // Each round shrinks the material by about chunk-size / summary-size; it ends in a few rounds.
    while (pieces.length > 1) {
      const summaries = await mapLimited(pieces, PARALLEL_CALLS, (piece, i) =>
        call(s, `${note(i + 1, pieces.length)}\n\n${piece}`, deadline, counter),
      );
      pieces = chunkTranscript(summaries, budget);
      note = () => COMBINE_NOTE;
      if (pieces.length === 1) return { text: await call(s, `${COMBINE_NOTE}\n\n${pieces[0]}`, deadline, counter), calls: counter.calls };
    }
    return { text: await call(s, pieces[0] ?? '', deadline, counter), calls: counter.calls };
  } catch (err) {
    throw asSummarizerError(err, signal, counter.calls);
  } finally {
    clear();
  }
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

async function call(s: SummarizerSettings, transcript: string, signal: AbortSignal, counter: { calls: number }): Promise<string> {
  const body = s.wire.body({
    model: s.model,
    instructions: s.prompt ?? DEFAULT_SUMMARY_PROMPT,
    transcript: `<conversation>\n${transcript}\n</conversation>`,
    maxTokens: s.maxSummaryTokens,
    request: s.request,
  });
  const text = await post(s, s.wire.path(s.model), body, signal, counter, answerLimit(s));
  const content = summaryContent(s.wire, text);
  if (!content) throw new SummarizerError('bad_response', `summarizer answer had no text: ${text.slice(0, 300)}`, counter.calls);
  return content;
}

/** One POST to the summarizer's API, marked as the gateway's own; the answer's text, bounded. */
async function post(s: SummarizerSettings, path: string, payload: unknown, signal: AbortSignal, counter: { calls: number }, limit: number): Promise<string> {
  counter.calls++;
  const url = new URL(`${s.url.replace(/\/+$/, '')}${path}`);
  const res = await s.dispatcher.request({
    origin: url.origin,
    path: url.pathname + url.search,
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', 'x-gateway-compaction': 'summarizer', ...s.headers },
    body: JSON.stringify(payload),
    signal,
  });
  const text = await boundedText(res.body, limit, counter.calls);
  if (res.statusCode >= 400) {
    throw new SummarizerError('rejected', `summarizer answered ${res.statusCode}: ${text.slice(0, 300)}`, counter.calls);
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
  const counter = { calls: 0 };
  if (!compact) throw new SummarizerError('rejected', 'the API has no compaction of its own', 0);
  const { deadline, clear } = deadlineOf(signal, s.timeoutMs);
  try {
    const text = await post(s, compact.path, compact.body({ model: s.model, items, request: s.request }), deadline, counter, limit);
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

function summaryContent(wire: SummarizerWire, text: string): string | undefined {
  try {
    const content = wire.text(JSON.parse(text));
    return typeof content === 'string' && content.trim() ? content.trim() : undefined;
  } catch {
    return undefined;
  }
}

async function mapLimited<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i], i);
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
