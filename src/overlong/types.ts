export type OverlongReason = 'body_too_large' | 'context_length';

export interface StatedLimits {
  limitTokens?: number; // the model's context window / max input tokens
  promptTokens?: number; // how many tokens the rejected prompt/input had
  completionTokens?: number; // tokens requested for the completion (max_tokens) when stated
  limitBytes?: number; // a body-size limit in bytes when stated (e.g. "Maximum request body size 1048576")
  bodyBytes?: number; // the rejected body's size in bytes when stated
  /** The provider counted max_tokens in the total ("A + B > C", "(prompt and prediction)"): lowering it cures too; leave it room. */
  completionCounted?: true;
}

export type Verdict = { overlong: true; reason: OverlongReason; limits: StatedLimits; rule: string } | { overlong: false; rule: string }; // rule = short stable name of the rule that decided, for logs/tests

export interface UpstreamError {
  status: number;
  contentType?: string;
  body: string; // already decompressed, decoded as UTF-8, at most ~1 MiB (may be truncated)
}
