import { createHash, createHmac } from 'node:crypto';
import { forEachInSlices } from '../lib/time-slice.js';

/** Where a request carries who it is: every credential header the APIs use, and a cookie. */
const TENANT_HEADERS = ['authorization', 'api-key', 'x-api-key', 'x-goog-api-key', 'cookie'] as const;

/**
 * Who a memory belongs to: a hash of every credential the request carries (never the values
 * themselves), so one tenant's summary or lesson is never served into another's conversation:
 * its credential headers, its cookie, and a `key` in its query (Gemini's). Null when it carries
 * none: then it is no one's, and shares nothing unless the gateway says anonymous requests may.
 * With `secret` (memory.tenantSecret) an HMAC keyed by it: what Redis holds then says nothing of a
 * credential to whoever reads Redis without the secret, not even whether a leaked key is among them.
 */
export function tenantOf(headers: Record<string, string | string[] | undefined>, query = '', secret?: string): string | null {
  const hash = (secret === undefined ? createHash('sha256') : createHmac('sha256', secret)).update('tenant');
  let carried = false;
  for (const name of TENANT_HEADERS) {
    const value = headers[name];
    const text = Array.isArray(value) ? value.join(',') : value;
    if (!text) continue;
    carried = true;
    hash.update(`\0${name}\0${text}`);
  }
  const key = query.includes('key=') ? new URLSearchParams(query).get('key') : null;
  if (key) {
    carried = true;
    hash.update(`\0?key\0${key}`);
  }
  return carried ? hash.digest('hex').slice(0, 32) : null;
}

/**
 * An item's identity for reuse: all of it, with object keys sorted (a client that re-serialises
 * the same history still matches) and prompt-cache hints left out.
 */
export function itemDigest(item: unknown): string {
  if (typeof item !== 'object' || item === null) return sha256(canonical(item));
  let digest = digests.get(item);
  if (digest === undefined) {
    const text = canonical(item);
    digest = sha256(text);
    digests.set(item, digest);
    sizes.set(item, Buffer.byteLength(text));
  }
  return digest;
}

/** A rescue looks a request's items up, then remembers them: each is serialised and hashed once. */
const digests = new WeakMap<object, string>();
/** The UTF-8 bytes of each item as digested (spanBytes): known without serialising it again. */
const sizes = new WeakMap<object, number>();

/** Digests every item ahead of a lookup, between time slices: a long history's hashing never holds the event loop. */
export function digestInSlices(items: readonly unknown[]): Promise<void> {
  return forEachInSlices(items, itemDigest);
}

/**
 * The UTF-8 bytes of `items[from .. from+length]` as their digests read them: no request that
 * repeats those items, however it writes them, is shorter (bar a number written shorter than
 * JavaScript writes it, `1e5`): a request far smaller than this cannot extend a span remembered of them.
 */
export function spanBytes(items: readonly unknown[], from: number, length: number): number {
  let bytes = 0;
  for (let i = from; i < from + length && i < items.length; i++) {
    const item = items[i];
    if (typeof item !== 'object' || item === null) bytes += Buffer.byteLength(canonical(item));
    else {
      // Serialised once: its size is kept with the digest a lookup or remember made of it already.
      itemDigest(item);
      bytes += sizes.get(item)!;
    }
  }
  return bytes;
}

/** Prompt-cache hints move from turn to turn without changing what a message says. */
const IGNORED_KEYS = new Set(['cache_control']);

/**
 * The digest of `items[from .. from+length]` for each asked length (in the order asked; undefined
 * past the end): one running hash over the items' digests, read at each length, so a remembered
 * span of any length is checked with one comparison and a long history costs one hash, not one a message.
 */
export function spanDigests(items: readonly unknown[], from: number, lengths: readonly number[]): Array<string | undefined> {
  const wanted = [...new Set(lengths)].filter((n) => n > 0 && from + n <= items.length).sort((a, b) => a - b);
  const found = new Map<number, string>();
  const hash = createHash('sha256').update('span\0');
  let done = 0;
  for (const length of wanted) {
    for (; done < length; done++) hash.update(itemDigest(items[from + done])).update('\0');
    found.set(length, hash.copy().digest('hex'));
  }
  return lengths.map((n) => found.get(n));
}

/**
 * Identifies a conversation: its tenant, upstream, API and model, and the items kept before any
 * summary (instructions and the opening user input). Many sessions share a system prompt; the
 * task tells them apart. The model is part of it: a summary made to fit one model's window is
 * not another's (a larger window would get it compacted ahead for nothing).
 */
export function sessionKey(
  tenant: string,
  upstream: string,
  api: string,
  model: string,
  items: readonly unknown[],
  fixedEnd: number,
  agentSession?: string,
): string {
  // The model is the client's string, of any characters: its length makes it unambiguous.
  const hash = createHash('sha256').update(`${tenant}\0${upstream}\0${api}\0${model.length}:${model}\0`);
  // The agent's own id of its session: the prefix may change under it (a date, a reminder), and
  // two sessions of one project share a prefix. Without one, the kept prefix is the conversation.
  if (agentSession !== undefined) return hash.update(`agent-session\0${agentSession}`).digest('hex').slice(0, 40);
  for (let i = 0; i < fixedEnd && i < items.length; i++) hash.update(itemDigest(items[i])).update('\0');
  return hash.digest('hex').slice(0, 40);
}

/**
 * The id an agent gives its session, where it sends one: Codex's window id (`x-codex-window-id`,
 * whose suffix moves on when Codex compacts the conversation itself, so what was remembered for the
 * window before is not reused), Claude Code's `x-claude-code-session-id`. Undefined for any other
 * client, or a value that is no id (over 200 characters, or other than letters, digits and `-_.:`).
 */
export function agentSessionOf(headers: Record<string, string | string[] | undefined>): string | undefined {
  for (const [name, label] of AGENT_SESSION_HEADERS) {
    const value = headers[name];
    const id = Array.isArray(value) ? value[0] : value;
    if (id !== undefined && AGENT_SESSION_ID.test(id)) return `${label}:${id}`;
  }
  return undefined;
}

const AGENT_SESSION_HEADERS = [
  ['x-codex-window-id', 'codex-window'],
  ['x-claude-code-session-id', 'claude-code'],
] as const;
const AGENT_SESSION_ID = /^[\w.:-]{1,200}$/;

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const keys = Object.keys(value)
      .filter((k) => !IGNORED_KEYS.has(k) && (value as Record<string, unknown>)[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
