import { GatewayError } from '../http/errors.js';

/** The provider's OpenAI base URL, split into what undici needs. */
export interface UpstreamTarget {
  origin: string;
  /** The base path without a trailing slash, e.g. `/openai/v1` or `/v1`. */
  basePath: string;
}

export function parseTarget(url: string): UpstreamTarget {
  const parsed = new URL(url);
  return { origin: parsed.origin, basePath: parsed.pathname.replace(/\/+$/, '') };
}

const DOT_SEGMENT = /(^|\/)\.\.?(\/|$)/;
/** `%252e`, `%252f`, `%255c`, `%2500`: a dot, slash, backslash or NUL for a server that decodes twice. */
const DOUBLE_ENCODED = /%25(2e|2f|5c|00)/i;

/** `.`/`..` segments raw or percent-encoded, encoded slashes and backslashes, and their double-encoded forms; `path` without the query. */
export function assertSafePath(path: string): void {
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch (cause) {
    throw new GatewayError('invalid_path', 'The request path is not valid percent-encoding.', { cause });
  }
  if (
    DOT_SEGMENT.test(path) ||
    DOT_SEGMENT.test(decoded) ||
    decoded.includes('\\') ||
    /%2f|%5c|%00/i.test(path) ||
    DOUBLE_ENCODED.test(path) ||
    decoded.includes('\0')
  ) {
    throw new GatewayError('invalid_path');
  }
}

/** Refuses a decoded path segment a client names (a Gemini model) that is a dot segment, or holds a slash, backslash or NUL. */
export function assertSafeSegment(segment: string): void {
  if (segment === '.' || segment === '..' || /[/\\\0]/.test(segment)) throw new GatewayError('invalid_path');
}
