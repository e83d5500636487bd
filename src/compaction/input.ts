import type { Config } from '../config/schema.js';
import type { Conversation, Dialect } from '../dialects/types.js';
import type { RememberedSpan } from './recalled.js';
import type { Summarizer, SummarizerFailureKind } from './summarizer-port.js';
import type { SizeTarget } from './size-target.js';

/** What is compacted: the client's request as its dialect reads it, and what memory holds of it. Never modified. */
export interface Compactable {
  dialect: Dialect;
  request: Record<string, unknown>;
  conversation: Conversation;
  /** The headers the request goes upstream with: an opt-in the compaction adds joins them. */
  headers?: Record<string, string | string[]>;
  bodyBytes: number;
  /** A remembered compaction whose span this request repeats: its summary stands for the span. */
  recalled?: RememberedSpan | null;
  /** Every bound block after the edit point goes stripped (a remembered lesson of a span read anew). */
  stripAll?: boolean;
  /** The newest item is never cut to fit (an agent's own compaction call carries its instruction there). */
  newestWhole?: boolean;
}

export type SummaryEvent =
  { phase: 'start'; items: number } | { phase: 'end'; ms: number; calls: number; failure?: SummarizerFailureKind; digested?: number };

/** What planning needs: the size to reach, why, and the config's knobs for it (nothing else of the config). */
export interface CompactionSettings {
  target: SizeTarget;
  /** Why the summary is there, in the words the summary's introduction uses. */
  because: string;
  compaction: Pick<Config['compaction'], 'strategy' | 'keepRecent' | 'mask' | 'summaryRole'>;
  /** What one summary may take and spend. */
  summary: Pick<Config['summarizer'], 'maxInputTokens' | 'maxSummaryTokens' | 'prompt' | 'maxCalls' | 'maxInputBytes'>;
  /** The summarizer's deadline, the caller's: past it, the summary is the deterministic digest. */
  deadline: AbortSignal;
  onSummary?: (event: SummaryEvent) => void;
}

export type CompactionInput = Compactable & CompactionSettings & { summarizer: Summarizer };
