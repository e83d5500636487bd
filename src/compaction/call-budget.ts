import { SUMMARY_BYTES_PER_TOKEN, jsonTextBytes } from './size.js';
import type { CallFit } from './summarizer-port.js';
import { entryBytes } from './transcript.js';

export interface CallSize {
  budget: number;
  maxTokens: number;
  overhead: number;
}

/** Conservative for code and JSON. */
const CHARS_PER_TOKEN = 3;
/** So that every round of combining shrinks. */
const CHUNK_SUMMARIES = 3;
export const MIN_SUMMARY_TOKENS = 64;

/** In a tight window the summary asked for shrinks until a chunk holds a few summaries' worth. */
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

export function affordsRound(pieces: string[], c: CallSize, left: { calls: number; bytes: number }): boolean {
  const bytes = pieces.reduce((sum, piece) => sum + jsonTextBytes(piece) + c.overhead, 0) + c.budget + c.overhead;
  return pieces.length + 1 <= left.calls && bytes <= left.bytes;
}

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
  // From the newest end: as few chunks as chunking in order makes.
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
  fill: number;
  bytes: number;
}

const NO_CHUNKS: Chunking = { count: 0, fill: 0, bytes: 0 };

function addOlder(chunks: Chunking, bytes: number, budget: number): Chunking {
  if (chunks.count === 0) return { count: 1, fill: bytes, bytes };
  if (chunks.fill + bytes > budget) return { count: chunks.count + 1, fill: bytes, bytes: chunks.bytes + bytes };
  return { count: chunks.count, fill: chunks.fill + bytes, bytes: chunks.bytes + bytes };
}

/** Each merge call reckoned a full one. */
function runCost(chunks: Chunking, c: CallSize): { calls: number; bytes: number } {
  if (chunks.count <= 1) return { calls: 1, bytes: chunks.bytes + c.overhead };
  const merges = mergeCalls(chunks.count, summariesPerCall(c));
  return { calls: chunks.count + merges, bytes: chunks.bytes + chunks.count * c.overhead + merges * (c.budget + c.overhead) };
}

function mergeCalls(n: number, k: number): number {
  let calls = 0;
  for (let left = n; left > 1;) {
    left = Math.ceil(left / k);
    calls += left;
  }
  return calls;
}

/** At least two, or merging never ends. */
function summariesPerCall(c: CallSize): number {
  const summary = c.maxTokens * SUMMARY_BYTES_PER_TOKEN + entryBytes('[summary 99 of 99]\n');
  return Math.max(2, Math.floor(c.budget / summary));
}
