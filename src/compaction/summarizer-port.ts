import type { SummarizerWire } from '../dialects/types.js';

/*
 * What the compaction needs of a summarizer, and nothing more: the API its calls are written in,
 * and a function that sends one. The rescue builds it (rescue/summarizer-client.ts) on the upstream
 * client, with the destination's credentials and the client's signal, and hands compaction the
 * deadline; compaction plans the calls, writes their bodies and reads their answers, and never
 * touches the network or a timer itself.
 */

/** One call the compaction asks for: a summary in the API's own model call, or the provider's own compaction. */
export interface SummarizerCall {
  kind: 'summary' | 'compact';
  body: string;
  /** The completion it asks for (0 for the provider's compaction, which asks none). */
  maxTokens: number;
}

/** A call's answer as it came back: any status, the text read whole. */
export interface SummarizerAnswer {
  status: number;
  text: string;
}

/**
 * Sends one call. It rejects with a SummarizerError when no answer could be read: `timeout`
 * (`signal` ended it, or the client's own timeouts did), `unreachable`, `bad_response` (an answer
 * past its bound), `aborted` (the client went away).
 */
export type SendCall = (call: SummarizerCall, signal: AbortSignal) => Promise<SummarizerAnswer>;

export interface Summarizer {
  /** How its calls are written and its answers read (the summarizer's API: chat, responses, messages or gemini). */
  wire: SummarizerWire;
  model: string;
  send: SendCall;
  /** Condense with the provider's own compaction first (the summarizer is the upstream and its API has one). */
  providerCompaction?: boolean;
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

export interface Refusal {
  status: number;
  body: string;
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
