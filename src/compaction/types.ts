import type { Dialect, Entry } from '../dialects/types.js';

export interface PlanInput {
  items: readonly unknown[];
  entries: readonly Entry[];
  dialect: Pick<Dialect, 'slots'>;
  /** Items kept as they are before the condensable part: head, opening, a remembered summary and its pins. */
  keepFirst: number;
  /** At most this many recent items are kept verbatim (fewer when they do not fit). */
  keepRecent: number;
  /** UTF-8 byte size that JSON.stringify(compactedItems) must not exceed. */
  targetBytes: number;
  /**
   * Where the tail stops growing (default: targetBytes): below the hard target, so that the
   * next turns fit under the same summary. Never a reason to cut anything.
   */
  aimBytes?: number;
  /** Bytes to set aside for the summary item that will replace the condensed part. */
  summaryReserveBytes: number;
  /** The newest item is never cut (an agent's own compaction call: its instruction rides there). */
  newestWhole?: boolean;
}

/**
 * What to keep and what to condense. The compacted list is
 * `[...items[0..keepFirst], summary?, ...pinned, ...tail]` (a summary only when `middle` is not empty).
 */
export interface Plan {
  middle: number[];
  /** Indices of items kept after the summary though older than the tail: the last user input. */
  pinned: number[];
  tailStart: number;
  /** The pinned items and the tail as they go out; a shortened one is a new object. */
  kept: unknown[];
  /** How many texts were cut and images replaced to fit (the last resort). */
  cut: number;
}

export type PlanFailure = { failure: 'nothing_to_shrink' | 'cannot_fit' };

/**
 * How the condensed part was made: old tool outputs masked (no model asked), the summarizer LLM,
 * the deterministic digest, or the provider's own compaction.
 */
export type Strategy = 'mask' | 'summarize' | 'fallback' | 'provider';
