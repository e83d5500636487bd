import type { SummarizerWire } from '../dialects/types.js';

/* Compaction plans the calls and reads their answers, and never touches the network or a timer itself. */

export interface SummarizerCall {
  kind: 'summary' | 'compact';
  body: string;
  maxTokens: number;
}

export interface SummarizerAnswer {
  status: number;
  text: string;
}

/** Rejects with a SummarizerError when no answer could be read. */
export type SendCall = (call: SummarizerCall, signal: AbortSignal) => Promise<SummarizerAnswer>;

export interface Summarizer {
  wire: SummarizerWire;
  model: string;
  send: SendCall;
  providerCompaction?: boolean;
  callFit?: CallFit;
  /** Null when refused for a reason other than length. */
  refused?: (refusal: Refusal) => Promise<CallFit | null>;
}

export type CallFit = (maxTokens: number) => number;

export interface Refusal {
  status: number;
  body: string;
  bytes: number;
  maxTokens: number;
}

export interface SummarizerTokens {
  input: number;
  output: number;
  estimated: boolean;
}

/** `overlong`: refused even after chunking to what it said, or a window too small for the instructions and a summary. */
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
