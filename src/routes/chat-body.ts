import { GatewayError } from '../errors.js';

/** The little the route needs to know about a chat request; the bytes themselves go upstream as-is. */
export interface ChatRequest {
  /** The parsed body, when it is a JSON object (only the rescue path reads further into it). */
  json: Record<string, unknown> | null;
  stream: boolean;
}

/**
 * Validates that the body is JSON. The client's bytes are never re-serialised for the first
 * attempt: providers' prompt caches depend on exact prefixes. A compressed body is passed on
 * untouched (the upstream judges it), so it is not parsed here.
 */
export function readChatRequest(body: Buffer | undefined, contentEncoding: string | undefined): ChatRequest {
  if (contentEncoding && contentEncoding.toLowerCase() !== 'identity') return { json: null, stream: false };
  if (!body || body.length === 0) throw new GatewayError('invalid_json', 'The request body is empty; expected a JSON object.');
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (cause) {
    throw new GatewayError('invalid_json', `The request body is not valid JSON: ${(cause as Error).message}`, { cause });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return { json: null, stream: false };
  const json = parsed as Record<string, unknown>;
  return { json, stream: json.stream === true };
}
