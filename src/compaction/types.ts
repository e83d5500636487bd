/** One element of a chat request's `messages`. Unknown fields are kept as they are. */
export interface ChatMessage {
  role: string;
  content?: unknown;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  [key: string]: unknown;
}

export interface ToolCall {
  id: string;
  type?: string;
  function?: { name?: string; arguments?: string };
  [key: string]: unknown;
}

export interface PlanInput {
  messages: ChatMessage[];
  /** How many of the most recent messages to keep verbatim (the tail may grow to stay valid). */
  keepRecent: number;
  /** UTF-8 byte size that JSON.stringify(compactedMessages) must not exceed. */
  targetBytes: number;
  /** Bytes to set aside for the summary message that will replace the middle. */
  summaryReserveBytes: number;
  /**
   * Leading messages kept as they are. Default: the leading system/developer messages; with a
   * remembered summary, those plus the summary and the messages pinned after it.
   */
  keepFirst?: number;
}

/**
 * What to keep and what to condense. The compacted array is
 * `[...head, summary, ...pinned, ...tail]` (summary only when `middle` is non-empty).
 */
export interface Plan {
  /** Leading system/developer messages: the very same objects, in order. */
  head: ChatMessage[];
  /** Messages to condense into one summary message, in order. */
  middle: ChatMessage[];
  /** The last user message when it lies before the tail: kept unchanged, after the summary. */
  pinned: ChatMessage[];
  /** Recent messages kept; a message whose content had to be shrunk is a new object. */
  tail: ChatMessage[];
  /** How many contents (strings or text parts) in the tail were cut down. */
  shrunkContents: number;
  /** How many image parts in the tail were replaced by a placeholder. */
  replacedImages: number;
}

export type PlanFailure = { failure: 'nothing_to_shrink' | 'cannot_fit' };
