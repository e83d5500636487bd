import { createHash, createHmac } from 'node:crypto';
import { forEachInSlices } from '../lib/time-slice.js';

const TENANT_HEADERS = ['authorization', 'api-key', 'x-api-key', 'x-goog-api-key', 'cookie'] as const;

/**
 * A hash of every credential carried (headers, cookie, Gemini's query `key`), so no tenant's summary reaches
 * another; null when none. With `secret`, an HMAC: Redis then reveals nothing, not even whether a leaked key is there.
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

/** Keys sorted (a client that re-serialises the same history still matches), prompt-cache hints left out. */
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

const digests = new WeakMap<object, string>();
const sizes = new WeakMap<object, number>();

export function digestInSlices(items: readonly unknown[]): Promise<void> {
  return forEachInSlices(items, itemDigest);
}

/** No request repeating these items is shorter (bar a number written shorter, `1e5`), however it writes them. */
export function spanBytes(items: readonly unknown[], from: number, length: number): number {
  let bytes = 0;
  for (let i = from; i < from + length && i < items.length; i++) {
    const item = items[i];
    if (typeof item !== 'object' || item === null) bytes += Buffer.byteLength(canonical(item));
    else {
      itemDigest(item);
      bytes += sizes.get(item)!;
    }
  }
  return bytes;
}

/** Prompt-cache hints move from turn to turn without changing what a message says. */
const IGNORED_KEYS = new Set(['cache_control']);

/** One running hash read at each length: a long history costs one hash, not one a message. */
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
 * Many sessions share a system prompt; the opening task tells them apart. The model is part of it: a summary
 * made to fit one model's window would get a larger window compacted ahead for nothing.
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
  const hash = createHash('sha256').update(`${tenant}\0${upstream}\0${api}\0${model.length}:${model}\0`);
  // The prefix may change under an agent's session (a date, a reminder), and two sessions of one project share one.
  if (agentSession !== undefined) return hash.update(`agent-session\0${agentSession}`).digest('hex').slice(0, 40);
  for (let i = 0; i < fixedEnd && i < items.length; i++) hash.update(itemDigest(items[i])).update('\0');
  return hash.digest('hex').slice(0, 40);
}

/**
 * Codex's window id moves its suffix on when Codex compacts the conversation itself, so what was remembered
 * for the window before is not reused.
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
