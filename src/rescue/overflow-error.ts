import { DIALECTS, type Api } from '../dialects/index.js';
import { decodeText, discard } from '../upstream/body.js';
import type { InspectedAnswer } from './inspect.js';

/*
 * An overflow the gateway understood but could not rescue, in the words the client's API uses
 * for one (its dialect's `overflow`). An agent starts its own compaction on its API's overflow
 * error: Claude Code on "prompt is too long", Codex on `context_length_exceeded`, Gemini CLI on
 * "input token count ... exceeds".
 * An nginx 413 page or a relay's own wording says none of that, and the agent retries the same
 * size or gives up. A refusal already in the API's words goes as it came, byte for byte.
 */

/**
 * The answer in the API's own overflow words, or null when it says so already (or is not an
 * overflow, or was not read whole). `prompt` and `limit`: the numbers where known, else the
 * request's estimate and, for a refusal that states no limit, one token less than it (the least
 * it says). The original body is let go.
 */
export function inApiWords(api: Api, answer: InspectedAnswer, prompt: number, limit: number | undefined): InspectedAnswer | null {
  if (!answer.verdict.overlong || !answer.held.complete || answer.response.status < 400) return null;
  const words = DIALECTS[api].overflow;
  if (words.says(decodeText(answer.held.bytes, answer.response.headers['content-encoding']))) return null;
  const bytes = Buffer.from(JSON.stringify(words.error(prompt, Math.max(1, limit ?? prompt - 1))));
  // What is left of the upstream's body goes; the relay sends the held bytes, whole.
  discard(answer.response.body);
  return {
    ...answer,
    response: { ...answer.response, status: 400, headers: { 'content-type': 'application/json', 'content-length': String(bytes.length) } },
    held: { bytes, complete: true },
  };
}
