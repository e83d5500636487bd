import type { SummarizerFailureKind, SummarizerTokens } from './summarizer-port.js';
import type { NewSpan } from './span.js';
import type { Strategy } from './types.js';

export type NotShrunkWhy = 'no_messages' | 'too_many_items' | 'undecodable_body' | 'nothing_to_shrink' | 'cannot_fit' | 'invalid_plan';

export interface CompactionFigures {
  messagesBefore: number;
  bytesBefore: number;
  tokensBefore: number;
}

/** What the compaction did to bound provider state (signed thinking) after its edit point. */
export interface BoundFigures {
  stripped: number;
  /** Stale blocks went covered by the provider's opt-in (`drop_block`) instead. */
  optIn: boolean;
}

/** The same compaction with every bound block after the edit point stripped; null when that changes nothing. */
export type Restrip = () => { body: Buffer; headers: Record<string, string>; bound: BoundFigures; span: NewSpan | undefined } | null;

export type CompactionResult =
  | (CompactionFigures & {
      outcome: 'compacted';
      body: Buffer;
      strategy: Strategy;
      messagesAfter: number;
      bytesAfter: number;
      tokensAfter: number;
      summarizerMs?: number;
      summarizerCalls: number;
      summarizerTokens?: SummarizerTokens;
      summarizerFailure?: SummarizerFailureKind;
      /** The provider's own compaction was asked for and failed: the summarizer condensed instead. */
      providerFailure?: SummarizerFailureKind;
      /** Headers the body needs besides the request's own (an opt-in's beta). */
      headers: Record<string, string>;
      /** Null for an API with no bound state to strip. */
      bound: BoundFigures | null;
      restrip: Restrip;
      memory: 'hit' | 'miss';
      /** Kept contents shortened as the last resort. */
      cut: number;
      newSpan?: NewSpan;
      /** The span in force, new or remembered: what stood for which items (the status page shows it). */
      span?: NewSpan;
    })
  | (CompactionFigures & { outcome: 'not_shrunk'; why: NotShrunkWhy; summarizerCalls: 0 });

export function notShrunk(figures: CompactionFigures, why: NotShrunkWhy): CompactionResult {
  return { ...figures, outcome: 'not_shrunk', why, summarizerCalls: 0 };
}
