import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { CredentialStyle } from '../dialects/types.js';
import { acceptedByUs } from './content-coding.js';

/** A header's value as one string: repeated field lines joined as RFC 9110 (5.3) combines them. */
export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** Plus `host` (undici sets it) and `expect`: Node answers a 100-continue here, and undici refuses to send it (UND_ERR_NOT_SUPPORTED). */
const HOP_BY_HOP = new Set([
  'connection',
  'expect',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'http2-settings',
]);

type HeaderValue = string | string[] | number | undefined;
type Headers = Record<string, HeaderValue>;

const NONE: ReadonlySet<string> = new Set();
// What nearly every request and answer says, parsed once.
const USUAL_CONNECTION = new Map<HeaderValue, ReadonlySet<string>>([
  ['keep-alive', new Set(['keep-alive'])],
  ['close', new Set(['close'])],
]);

function unsafe(value: HeaderValue): boolean {
  if (Array.isArray(value)) return value.some(unsafe);
  return typeof value === 'string' && (value.includes('\r') || value.includes('\n'));
}

function connectionNamed(connection: HeaderValue): ReadonlySet<string> {
  if (connection === undefined) return NONE;
  const usual = USUAL_CONNECTION.get(connection);
  if (usual) return usual;
  return new Set(
    String(connection)
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter(Boolean),
  );
}

/** HOP_BY_HOP and a caller's own names to drop, as one set: one lookup a header instead of two. */
const DROPPED = new WeakMap<ReadonlySet<string>, ReadonlySet<string>>();

function droppedWith(drop: ReadonlySet<string>): ReadonlySet<string> {
  let both = DROPPED.get(drop);
  if (!both) {
    both = new Set([...HOP_BY_HOP, ...drop]);
    DROPPED.set(drop, both);
  }
  return both;
}

/** Copies headers minus hop-by-hop ones, those the Connection header names, and any holding CR/LF. */
export function endToEnd(headers: Headers, drop: ReadonlySet<string> = NONE): Record<string, string | string[]> {
  const named = connectionNamed(headers.connection);
  const dropped = droppedWith(drop);
  const out: Record<string, string | string[]> = {};
  // Runs on every request and every answer: no arrays, no Connection parsing when absent; names
  // come lowered from Node and undici, and V8 gives back the same string then (round 7).
  for (const name in headers) {
    const value = headers[name];
    const key = name.toLowerCase();
    if (value === undefined || dropped.has(key) || (named !== NONE && named.has(key)) || unsafe(value)) continue;
    out[key] = typeof value === 'number' ? String(value) : value;
  }
  return out;
}

export interface CredentialOptions {
  /** Sent instead of whatever credentials the client sent. */
  apiKey?: string;
  /** `Authorization: Bearer <key>` (the default) or `x-api-key: <key>`. */
  style?: CredentialStyle;
  /** The client's credentials are the gateway's own keys (auth.keys): never sent on, whether or not `apiKey` replaces them. */
  gatewayKeys?: boolean;
}

/** Less a client's Gemini `key` when it is not the client's to send on (the gateway sends its own, or it is a gateway key). */
export function queryWithoutKey(query: string, dropKey: boolean): string {
  if (!dropKey || !query.includes('key=')) return query;
  const params = new URLSearchParams(query);
  params.delete('key');
  return params.toString();
}

/** Where clients put their credentials: OpenAI's Bearer token, Azure's api-key, x-api-key and Google's x-goog-api-key. */
export const CLIENT_CREDENTIALS = ['authorization', 'api-key', 'x-api-key', 'x-goog-api-key'] as const;

/** This hop as `X-Forwarded-*` tell it: the address that connected to the gateway, and the Host it asked for. */
export interface Hop {
  address: string | undefined;
  host: string | undefined;
}

/** On the chat route the body goes separately, so its length is undici's; the passthrough keeps the client's. */
export function requestHeadersForUpstream(
  incoming: IncomingHttpHeaders,
  requestId: string,
  credentials: CredentialOptions,
  hop: Hop,
  drop: ReadonlySet<string> = DROP_TO_UPSTREAM,
): Record<string, string | string[]> {
  const headers = endToEnd(incoming, drop);
  forwarded(headers, hop);
  if (credentials.apiKey || credentials.gatewayKeys) for (const name of CLIENT_CREDENTIALS) delete headers[name];
  if (credentials.apiKey) {
    if (credentials.style === 'x-api-key' || credentials.style === 'x-goog-api-key') headers[credentials.style] = credentials.apiKey;
    else headers.authorization = `Bearer ${credentials.apiKey}`;
  }
  if (typeof headers['accept-encoding'] === 'string') {
    // The gateway must be able to read an error body to classify it.
    headers['accept-encoding'] = acceptedByUs(headers['accept-encoding']);
  }
  headers['x-request-id'] = requestId;
  return headers;
}

/** The client's address appended to its `X-Forwarded-For` (only the upstream can decide how far to trust it); earlier proto, host kept. */
function forwarded(headers: Record<string, string | string[]>, hop: Hop): void {
  const address = hop.address?.startsWith('::ffff:') && hop.address.includes('.') ? hop.address.slice(7) : hop.address;
  if (address) {
    const prior = headers['x-forwarded-for'];
    const list = Array.isArray(prior) ? prior.join(', ') : prior;
    headers['x-forwarded-for'] = list?.trim() ? `${list}, ${address}` : address;
  }
  headers['x-forwarded-proto'] ??= 'http';
  if (hop.host && !unsafe(hop.host)) headers['x-forwarded-host'] ??= hop.host;
}

const DROP_TO_UPSTREAM = new Set(['content-length', 'x-gateway-compaction', 'x-request-id']);
const FROM_UPSTREAM_DROP = new Set(['x-gateway-compaction']);
/** For a body streamed through untouched: its length stays the client's. */
export const DROP_FROM_STREAMED = new Set(['x-gateway-compaction', 'x-request-id']);

export function responseHeadersForClient(upstream: Headers, requestId: string): OutgoingHttpHeaders {
  // The compaction header is the gateway's word to its client: an upstream's is not passed on.
  const headers: OutgoingHttpHeaders = endToEnd(upstream, FROM_UPSTREAM_DROP);
  const theirs = headers['x-request-id'];
  if (theirs !== undefined && theirs !== requestId) headers['x-upstream-request-id'] = theirs;
  headers['x-request-id'] = requestId;
  return headers;
}
