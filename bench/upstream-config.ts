/** What the fake upstream (upstream.ts, a process of its own) and the bench's clients agree on. */

export interface UpstreamConfig {
  /** Size of a non-streaming answer's body in bytes (about). */
  answerBytes: number;
  /** Writes per stream, each one SSE event; the last is `data: [DONE]`. */
  streamEvents: number;
  streamGapMs: number;
  /** Chat bodies larger than this are rejected as overlong, OpenAI style. */
  limitBytes?: number;
  /** How long the summarizer takes to answer one call. */
  summaryDelayMs: number;
}

/** A request carrying this header is never rejected as overlong (the no-rescue reference). */
export const ACCEPT_ANY_SIZE = 'x-bench-accept-any-size';
/** Each SSE event carries the upstream's clock when it was written, for the chunk delay. */
export const SENT_AT_FIELD = 'x_sent_at';
