import { createHash } from 'node:crypto';

/**
 * Who a memory belongs to: a hash of the credential the client presented (never the value
 * itself), so one tenant's summary is never served into another's conversation.
 */
export function tenantOf(headers: Record<string, string | string[] | undefined>): string {
  const credential = headers.authorization ?? headers['api-key'] ?? headers['x-api-key'] ?? headers['x-goog-api-key'] ?? '';
  return sha256(`tenant\0${Array.isArray(credential) ? credential.join(',') : credential}`).slice(0, 32);
}

/**
 * An item's identity for reuse: all of it, with object keys sorted (a client that re-serialises
 * the same history still matches) and prompt-cache hints left out.
 */
export function itemDigest(item: unknown): string {
  if (typeof item !== 'object' || item === null) return sha256(canonical(item));
  let digest = digests.get(item);
  if (digest === undefined) {
    digest = sha256(canonical(item));
    digests.set(item, digest);
  }
  return digest;
}

/** A rescue looks a request's items up, then remembers them: each is serialised and hashed once. */
const digests = new WeakMap<object, string>();

/** Prompt-cache hints move from turn to turn without changing what a message says. */
const IGNORED_KEYS = new Set(['cache_control']);

/**
 * Running digests over `items[from..]`: element i identifies items[from .. from+i]
 * together (each link hashes the previous one), so a remembered span of any length is checked
 * with one comparison. Computed lazily, up to `count` messages.
 */
export function chainDigests(items: readonly unknown[], from: number, count: number): string[] {
  const out: string[] = [];
  let previous = 'chain';
  for (let i = from; i < Math.min(items.length, from + count); i++) {
    previous = sha256(`${previous}\0${itemDigest(items[i])}`);
    out.push(previous);
  }
  return out;
}

/**
 * Identifies a conversation: its tenant, upstream, API, and the items kept before any summary
 * (instructions and the opening user input). Many sessions share a system prompt; the task tells
 * them apart.
 */
export function sessionKey(tenant: string, upstream: string, api: string, items: readonly unknown[], fixedEnd: number): string {
  const hash = createHash('sha256').update(`${tenant}\0${upstream}\0${api}\0`);
  for (let i = 0; i < fixedEnd && i < items.length; i++) hash.update(itemDigest(items[i])).update('\0');
  return hash.digest('hex').slice(0, 40);
}

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
