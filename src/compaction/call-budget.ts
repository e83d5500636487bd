/*
 * The call budget's arithmetic: what a run of summarizer calls over chunks of a transcript costs
 * (calls and bytes sent, the merges included), and so where the newest items one run can afford
 * start. Pure; summarize.ts makes the calls.
 */
import { SUMMARY_BYTES_PER_TOKEN } from './size.js';
import { entryBytes } from './transcript.js';

/** One call's size: the transcript it carries, the summary it asks for, and the body around the transcript. */
export interface CallSize {
  budget: number;
  maxTokens: number;
  overhead: number;
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
