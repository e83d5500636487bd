import zlib from 'node:zlib';
import { DEFAULTS } from '../config/schema.js';
import { GatewayError } from '../errors.js';

/** The little the route needs to know about a chat request; the bytes themselves go upstream as-is. */
export interface ChatRequest {
  /**
   * The parsed body, when it is a JSON object the rescue can compact (not nested too deeply, not
   * compressed). Parsed on first read: only the rescue path (and proactive compaction) looks
   * inside, so a request that simply passes through never pays for it.
   */
  json: Record<string, unknown> | null;
  stream: boolean;
  /** Size of the JSON body once decoded (the wire size when it was not compressed). */
  bytes: number;
}

/**
 * Nesting deeper than this is forwarded but never compacted: compaction serialises the request
 * again, and JSON.stringify overflows the stack at a few thousand levels. Real requests (tool
 * schemas included) nest a few dozen levels at most.
 */
export const MAX_COMPACTABLE_DEPTH = 256;

/**
 * Validates that the body is JSON, decompressing it first (bounded by `limitBytes`) when the
 * client sent it with a content-encoding. The client's bytes are never re-serialised for the
 * first attempt: providers' prompt caches depend on exact prefixes.
 */
export function readChatRequest(
  body: Buffer | undefined,
  contentEncoding: string | undefined,
  limitBytes: number = DEFAULTS.bodyLimitBytes,
): ChatRequest {
  const codings = encodingsOf(contentEncoding);
  if (!body || body.length === 0) throw new GatewayError('invalid_json', 'The request body is empty; expected a JSON object.');
  const decoded = decompress(body, codings, limitBytes);
  const shape = validate(decoded);
  if (typeof shape !== 'object' || shape === null || Array.isArray(shape)) return { json: null, stream: false, bytes: decoded.length };
  const stream = (shape as Record<string, unknown>).stream === true;
  // A compressed request can be compacted too: the replay goes as plain JSON (routes/rescue.ts).
  return lazyRequest(decoded, stream);
}

/**
 * JSON.parse over the bytes read as latin1 accepts exactly the bodies it accepts over them read
 * as UTF-8: JSON's syntax is all ASCII, a UTF-8 decoder never swallows an ASCII byte, and any
 * non-ASCII character is valid inside a string and invalid outside one, whichever way it was
 * decoded. Reading latin1 is a copy; decoding UTF-8 is not (on a 1 MiB agent request, 1.6 ms
 * against 5 ms). Its strings are wrong for non-ASCII text, so only the shape and ASCII keys of the
 * result are used. The error message still comes from the UTF-8 parse, as before.
 */
function validate(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('latin1'));
  } catch {
    return parseUtf8(body);
  }
}

function parseUtf8(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (cause) {
    throw new GatewayError('invalid_json', `The request body is not valid JSON: ${(cause as Error).message}`, { cause });
  }
}

function lazyRequest(body: Buffer, stream: boolean): ChatRequest {
  let json: Record<string, unknown> | null | undefined;
  return {
    stream,
    bytes: body.length,
    get json() {
      if (json === undefined) {
        // Valid as latin1 means valid as UTF-8 (see validate), with the same shape: an object.
        const parsed = parseUtf8(body) as Record<string, unknown>;
        json = nestedDeeperThan(parsed, MAX_COMPACTABLE_DEPTH) ? null : parsed;
      }
      return json;
    },
  };
}

/** Iterative, so that it cannot overflow the stack itself; stops at the first path too deep. */
function nestedDeeperThan(root: object, limit: number): boolean {
  const stack: Array<{ value: object; depth: number }> = [{ value: root, depth: 1 }];
  for (let item = stack.pop(); item; item = stack.pop()) {
    if (item.depth > limit) return true;
    const children = Array.isArray(item.value) ? item.value : Object.values(item.value);
    for (const child of children) {
      if (typeof child === 'object' && child !== null) stack.push({ value: child, depth: item.depth + 1 });
    }
  }
  return false;
}

type Coding = 'gzip' | 'deflate' | 'br';

/** The codings applied to the body, in the order they were applied; `identity` drops out. */
function encodingsOf(header: string | undefined): Coding[] {
  if (!header) return [];
  const codings: Coding[] = [];
  for (const raw of header.split(',')) {
    const coding = raw.trim().toLowerCase();
    if (coding === '' || coding === 'identity') continue;
    if (coding === 'gzip' || coding === 'x-gzip') codings.push('gzip');
    else if (coding === 'deflate' || coding === 'br') codings.push(coding);
    else throw new GatewayError('unsupported_media_type', `Unsupported content-encoding "${coding}"; use gzip, deflate, br or none.`);
  }
  return codings;
}

/**
 * Undoes the codings, last applied first. The decoded size may not pass `limitBytes`, the same
 * limit the raw body has: a few KB of gzip can inflate to gigabytes.
 */
function decompress(body: Buffer, codings: Coding[], limitBytes: number): Buffer {
  let bytes = body;
  for (const coding of [...codings].reverse()) {
    try {
      bytes = decode(bytes, coding, limitBytes);
    } catch (cause) {
      if ((cause as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
        throw new GatewayError('request_too_large', `The request body is larger than the gateway's limit of ${limitBytes} bytes once decompressed.`, { cause });
      }
      throw new GatewayError('bad_request', `The request body is not valid ${coding} data: ${(cause as Error).message}`, { cause });
    }
  }
  return bytes;
}

function decode(bytes: Buffer, coding: Coding, maxOutputLength: number): Buffer {
  if (coding === 'gzip') return zlib.gunzipSync(bytes, { maxOutputLength });
  if (coding === 'br') return zlib.brotliDecompressSync(bytes, { maxOutputLength });
  try {
    return zlib.inflateSync(bytes, { maxOutputLength });
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw err;
    // Some clients send raw deflate, without the zlib wrapper.
    return zlib.inflateRawSync(bytes, { maxOutputLength });
  }
}
