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
  /** How long a non-streaming answer waits before it is sent (0 when unset). */
  answerDelayMs?: number;
  /**
   * Parse each chat body as a provider does: `stream` is read from it, and a body that is not
   * JSON gets OpenAI's 400 (BAD_JSON_MESSAGE). Off, a body is never parsed (cheaper, for the bench).
   */
  parseBodies?: boolean;
  /** Idle keep-alive time of the upstream's connections (60 s when unset). */
  keepAliveMs?: number;
}

/** A request carrying this header is never rejected as overlong (the no-rescue reference). */
export const ACCEPT_ANY_SIZE = 'x-bench-accept-any-size';
/** A request carrying this header is never answered: it is held until the proxy closes it. */
export const HOLD_ANSWER = 'x-bench-hold-answer';
/** OpenAI's message for a body that is not JSON. */
export const BAD_JSON_MESSAGE = 'We could not parse the JSON body of your request.';
/** The model the fake upstream lists at GET /v1/models and names in its answers. */
export const MODEL = 'fake-model';
/** Each SSE event carries the upstream's clock when it was written, for the chunk delay. */
export const SENT_AT_FIELD = 'x_sent_at';
