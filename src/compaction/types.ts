import type { Dialect, Entry } from '../dialects/types.js';

export interface PlanInput {
  items: readonly unknown[];
  entries: readonly Entry[];
  dialect: Pick<Dialect, 'slots'>;
  keepFirst: number;
  keepRecent: number;
  targetBytes: number;
  /** Below the hard target, so the next turns fit under the same summary. Never a reason to cut anything. */
  aimBytes?: number;
  summaryReserveBytes: number;
  /** An agent's own compaction call: its instruction rides there. */
  newestWhole?: boolean;
}

/** The compacted list is `[...items[0..keepFirst], summary?, ...pinned, ...tail]`. */
export interface Plan {
  middle: number[];
  pinned: number[];
  tailStart: number;
  kept: unknown[];
  cut: number;
}

export type PlanFailure = { failure: 'nothing_to_shrink' | 'cannot_fit' };

export type Strategy = 'mask' | 'summarize' | 'fallback' | 'provider';
