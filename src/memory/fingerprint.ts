import { createHash } from 'node:crypto';
import type { ChatMessage } from '../compaction/types.js';

/**
 * Who a memory belongs to: a hash of the credential the client presented (never the value
 * itself), so one tenant's summary is never served into another's conversation.
 */
export function tenantOf(headers: Record<string, string | string[] | undefined>): string {
  const credential = headers.authorization ?? headers['api-key'] ?? headers['x-api-key'] ?? '';
  return sha256(`tenant\0${Array.isArray(credential) ? credential.join(',') : credential}`).slice(0, 32);
}

/**
 * A message's identity for reuse: its role, name, content, tool calls and tool call id, with
 * object keys sorted (a client that re-serialises the same history still matches) and
 * prompt-cache hints left out.
 */
export function messageDigest(message: ChatMessage): string {
  let digest = digests.get(message);
  if (digest === undefined) {
    digest = computeDigest(message);
    digests.set(message, digest);
  }
  return digest;
}

/** A rescue looks a request's messages up, then remembers them: each is serialised and hashed once. */
const digests = new WeakMap<object, string>();

function computeDigest(message: ChatMessage): string {
  const identity = {
    role: message.role,
    name: message.name,
    content: message.content,
    tool_calls: message.tool_calls,
    tool_call_id: message.tool_call_id,
    function_call: message.function_call,
  };
  return sha256(canonical(identity));
}

/** Prompt-cache hints move from turn to turn without changing what a message says. */
const IGNORED_KEYS = new Set(['cache_control']);

/**
 * Running digests over `messages[from..]`: element i identifies messages[from .. from+i]
 * together (each link hashes the previous one), so a remembered span of any length is checked
 * with one comparison. Computed lazily, up to `count` messages.
 */
export function chainDigests(messages: ChatMessage[], from: number, count: number): string[] {
  const out: string[] = [];
  let previous = 'chain';
  for (let i = from; i < Math.min(messages.length, from + count); i++) {
    previous = sha256(`${previous}\0${messageDigest(messages[i])}`);
    out.push(previous);
  }
  return out;
}

/**
 * Identifies a conversation: its tenant, upstream, leading instructions and first message after
 * them. Many sessions share a system prompt; the first message tells them apart.
 */
export function sessionKey(tenant: string, upstream: string, messages: ChatMessage[], headEnd: number): string {
  const hash = createHash('sha256').update(`${tenant}\0${upstream}\0`);
  for (let i = 0; i <= headEnd && i < messages.length; i++) hash.update(messageDigest(messages[i])).update('\0');
  return hash.digest('hex').slice(0, 40);
}

export function headDigest(messages: ChatMessage[], headEnd: number): string {
  const hash = createHash('sha256');
  for (let i = 0; i < headEnd; i++) hash.update(messageDigest(messages[i])).update('\0');
  return hash.digest('hex');
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
