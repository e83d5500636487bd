export type OverlongReason = 'body_too_large' | 'context_length';

/** Numbers the error text states; each only when stated. */
export interface StatedLimits {
  limitTokens?: number; // the model's context window / max input tokens
  promptTokens?: number; // how many tokens the rejected prompt/input had
  completionTokens?: number; // tokens requested for the completion (max_tokens) when stated
  limitBytes?: number; // a body-size limit in bytes when stated (e.g. "Maximum request body size 1048576")
  bodyBytes?: number; // the rejected body's size in bytes when stated
  /**
   * Set when the error's numbers or words show the provider counted the requested completion
   * (max_tokens) in the total it compared with the window: "A + B > C", "X in the messages,
   * Y in the completion", "N output tokens and your prompt contains M input tokens", "(prompt
   * and prediction)". Then lowering max_tokens also cures the overflow, and the size target
   * must leave room for the completion. Absent when the error states only the input's size.
   */
  completionCounted?: true;
}

export type Verdict = { overlong: true; reason: OverlongReason; limits: StatedLimits; rule: string } | { overlong: false; rule: string }; // rule = short stable name of the rule that decided, for logs/tests

export interface UpstreamError {
  status: number;
  contentType?: string;
  body: string; // already decompressed, decoded as UTF-8, at most ~1 MiB (may be truncated)
}
