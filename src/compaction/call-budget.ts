/*
 * The call budget's arithmetic: what a run of summarizer calls over chunks of a transcript costs
 * (calls and bytes sent, the merges included), and so where the newest items one run can afford
 * start, and how large one call is. Pure; summary-pass.ts makes the calls.
 */
import { SUMMARY_BYTES_PER_TOKEN, jsonTextBytes } from './size.js';
import type { CallFit } from './summarizer-port.js';
import { entryBytes } from './transcript.js';

/** One call's size: the transcript it carries, the summary it asks for, and the body around the transcript. */
export interface CallSize {
  budget: number;
  maxTokens: number;
  overhead: number;
}

/** Characters per token assumed when sizing the summarizer's input: conservative for code and JSON. */
const CHARS_PER_TOKEN = 3;
/** A chunk holds at least this many summaries' worth of text, so that every round of combining shrinks. */
const CHUNK_SUMMARIES = 3;
/** The smallest summary asked for when a window is tight. */
export const MIN_SUMMARY_TOKENS = 64;

/**
 * How much transcript one call carries (JSON-escaped bytes) and the summary it asks for: within
 * `maxInputTokens`, and within what fits the summarizer's window where that is known (`callFit`),
 * the body around the transcript (`overheadAt` a completion) counted. In a tight window the summary
 * asked for shrinks until a chunk holds a few summaries' worth; undefined when the window is too
 * small for any.
 */
export function callSize(
  s: { maxInputTokens: number; maxSummaryTokens: number; callFit?: CallFit },
  overheadAt: (maxTokens: number) => number,
): CallSize | undefined {
  const byTokens = Math.max(2_000, (s.maxInputTokens - s.maxSummaryTokens) * CHARS_PER_TOKEN - 4_000);
  if (!s.callFit) return { budget: byTokens, maxTokens: s.maxSummaryTokens, overhead: overheadAt(s.maxSummaryTokens) };
  for (let tokens = s.maxSummaryTokens; tokens >= MIN_SUMMARY_TOKENS; tokens = Math.floor(tokens * 0.8)) {
    const overhead = overheadAt(tokens);
    const room = Math.min(byTokens, s.callFit(tokens) - overhead);
    if (room >= CHUNK_SUMMARIES * tokens * SUMMARY_BYTES_PER_TOKEN) return { budget: room, maxTokens: tokens, overhead };
  }
  return undefined;
}

/** Room, within what is `left`, for a round of merging these pieces and for one last merge after it. */
export function affordsRound(pieces: string[], c: CallSize, left: { calls: number; bytes: number }): boolean {
  const bytes = pieces.reduce((sum, piece) => sum + jsonTextBytes(piece) + c.overhead, 0) + c.budget + c.overhead;
  return pieces.length + 1 <= left.calls && bytes <= left.bytes;
}

/**
 * Where the newest items one run can afford start, the earlier summary read first: the most
 * of them whose calls (parts and merges, as `runCost` counts them) are within what is `left`;
 * undefined when not even the newest one is.
 */
export function newestAffordable(
  sizes: number[],
  earlier: number[],
  c: CallSize,
  left: { calls: number; bytes: number },
): number | undefined {
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

/** `chunks` with an older entry before them, by the rule of transcript.ts's `chunkSizes`. */
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
  for (let left = n; left > 1;) {
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
