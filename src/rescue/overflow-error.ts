import type { Api } from '../dialects/types.js';
import { decodeText, discard } from '../upstream/body.js';
import type { InspectedAnswer } from './inspect.js';

/*
 * An overflow the gateway understood but could not rescue, in the words the client's API uses
 * for one. An agent starts its own compaction on its API's overflow error: Claude Code on "prompt
 * is too long", Codex on `context_length_exceeded`, Gemini CLI on "input token count ... exceeds".
 * An nginx 413 page or a relay's own wording says none of that, and the agent retries the same
 * size or gives up. A refusal already in the API's words goes as it came, byte for byte.
 */

interface OverflowWords {
  /** Whether an error body already says "too long" as the API's clients read it. */
  says(body: string): boolean;
  /** The API's own overflow error, with the numbers: the prompt's tokens and the window's. */
  error(prompt: number, limit: number): unknown;
}

const openai = (param: string): OverflowWords => ({
  says: (body) => /"code"\s*:\s*"context_length_exceeded"/.test(body),
  error: (prompt, limit) => ({
    error: {
      message: `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${prompt} tokens. Please reduce the length of the messages.`,
      type: 'invalid_request_error',
      param,
      code: 'context_length_exceeded',
    },
  }),
});

const WORDS: Record<Api, OverflowWords> = {
  chat: openai('messages'),
  responses: openai('input'),
  messages: {
    says: (body) => body.includes('prompt is too long'),
    error: (prompt, limit) => ({ type: 'error', error: { type: 'invalid_request_error', message: `prompt is too long: ${prompt} tokens > ${limit} maximum` } }),
  },
  gemini: {
    says: (body) => body.includes('exceeds the maximum number of tokens allowed'),
    error: (prompt, limit) => ({ error: { code: 400, message: `The input token count (${prompt}) exceeds the maximum number of tokens allowed (${limit}).`, status: 'INVALID_ARGUMENT' } }),
  },
};

/**
 * The answer in the API's own overflow words, or null when it says so already (or is not an
 * overflow, or was not read whole). `prompt` and `limit`: the numbers where known, else the
 * request's estimate and, for a refusal that states no limit, one token less than it (the least
 * it says). The original body is let go.
 */
export function inApiWords(api: Api, answer: InspectedAnswer, prompt: number, limit: number | undefined): InspectedAnswer | null {
  if (!answer.verdict.overlong || !answer.held.complete || answer.answer.status < 400) return null;
  const words = WORDS[api];
  if (words.says(decodeText(answer.held.bytes, answer.answer.headers['content-encoding']))) return null;
  const bytes = Buffer.from(JSON.stringify(words.error(prompt, Math.max(1, limit ?? prompt - 1))));
  // What is left of the upstream's body goes; the relay sends the held bytes, whole.
  discard(answer.answer.body);
  return {
    ...answer,
    answer: { ...answer.answer, status: 400, headers: { 'content-type': 'application/json', 'content-length': String(bytes.length) } },
    held: { bytes, complete: true },
  };
}
