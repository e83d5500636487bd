import { LRUCache } from 'lru-cache';
import type { RememberedSpan } from '../compaction/recalled.js';
import { mergedLimit, type LearnedLimit } from './limits.js';

export type { LearnedLimit } from './limits.js';

/** One remembered compaction of a conversation: the span as the compaction reads it, and how the store knows it again. */
export interface MemoryEntry extends RememberedSpan {
  /** Chain digest of the span's items (see fingerprint.ts): reuse needs an exact match. */
  spanDigest: string;
  /** What was known to fit when it was made, and where it aimed. */
  fitBytes: number;
  aimBytes: number;
  /** The conversation's bytes per token, as the rejection that made it said (absent: not known). */
  bytesPerToken?: number;
  createdAt: number;
}

export interface MemoryStore {
  /** The session's entries, newest first. */
  entries(session: string): Promise<MemoryEntry[]>;
  /**
   * Adds an entry to the session's. With `lease`, only while that lease is still the session's
   * (a fenced write): false, and nothing written, once it is not.
   */
  remember(session: string, entry: MemoryEntry, lease?: string): Promise<boolean>;
  /** What was learned under a key (one tenant, upstream and model: see CompactionMemory). */
  limit(key: string): Promise<LearnedLimit | undefined>;
  /** A conversation's entries and what was learned under `limitKey` (either may be left out: null), in one read. */
  recall(session: string | null, limitKey: string | null): Promise<{ entries: MemoryEntry[]; limit?: LearnedLimit }>;
  /** Adds a lesson to what is known under the key (limits.ts mergedLimit), and says what is known now. */
  learn(key: string, limit: LearnedLimit): Promise<LearnedLimit>;
  /** Replaces what is known under the key (a loosened limit); an empty one forgets it. */
  replaceLimit(key: string, limit: LearnedLimit): Promise<void>;
  /** Lowers what is kept of a tenant's reach to `reach` where it is smaller (each size only falls). */
  markTenant(tenant: string, reach: Partial<Reach>): Promise<void>;
  /** The smallest requests of a tenant that anything remembered or learned for it could concern; undefined: nothing. */
  reachOf(tenant: string): Promise<Reach | undefined>;
  /**
   * False only when no tenant can have anything remembered: every request then skips hashing its
   * credential and asking. A store shared between replicas can never say so.
   */
  mayHaveTenants(): boolean;
  /** Whether other processes write it too (Redis): then what this process remembered is not all there is. */
  readonly shared: boolean;
  /** Takes the conversation's lease as `lease` for `ttlMs` (SET NX PX): false while another holds it. */
  acquire(session: string, lease: string, ttlMs: number): Promise<boolean>;
  /** Extends the lease while it is still `lease`'s: false once it is not (expired, or taken since). */
  renew(session: string, lease: string, ttlMs: number): Promise<boolean>;
  /** Frees the lease if it is still `lease`'s (compare and delete): never another's. */
  release(session: string, lease: string): Promise<void>;
  /** Resolves once the conversation's lease is free, after `ms` at most, or when `signal` aborts. */
  whenFree(session: string, ms: number, signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

/**
 * What a tenant's memory could concern, as sizes of request: `extending`, the smallest request
 * that could extend a compaction remembered for it; `disproving`, the smallest accepted request
 * that could disprove a limit learned for it. Infinity: none.
 */
export interface Reach {
  extending: number;
  disproving: number;
}

export const NO_REACH: Readonly<Reach> = { extending: Infinity, disproving: Infinity };

/** Entries kept per conversation: later turns extend the newest; older ones rarely match again. */
const ENTRIES_PER_SESSION = 4;

export function withEntry(list: MemoryEntry[], entry: MemoryEntry): MemoryEntry[] {
  const others = list.filter((e) => e.spanDigest !== entry.spanDigest);
  return [entry, ...others].slice(0, ENTRIES_PER_SESSION);
}

/** In-process: a bounded LRU, by bytes, with a TTL. Nothing to set up. */
export class LocalStore implements MemoryStore {
  readonly shared = false;
  private readonly cache: LRUCache<string, MemoryEntry[] | LearnedLimit | Reach>;
  /** Set by the first markTenant: from then on every request asks (entries expire; the flag need not). */
  private tenantsMarked = false;
  /** Conversations being compacted by a request of this process. */
  private readonly leases = new Map<string, LocalLease>();

  constructor(maxBytes: number, ttlSeconds: number) {
    this.cache = new LRUCache({
      maxSize: maxBytes,
      sizeCalculation: (value, key) => Math.max(1, key.length + JSON.stringify(value).length),
      ttl: ttlSeconds * 1000,
    });
  }

  async entries(session: string): Promise<MemoryEntry[]> {
    return (this.cache.get(`s:${session}`) as MemoryEntry[] | undefined) ?? [];
  }

  async remember(session: string, entry: MemoryEntry, lease?: string): Promise<boolean> {
    if (lease !== undefined && this.leases.get(session)?.token !== lease) return false;
    // A copy of its own, as Redis keeps one: a string parsed out of a request is a slice of the
    // request's whole text (V8's JSON.parse), and an entry holding one line of it would keep a
    // 20 MB body alive for as long as it is remembered.
    const own = JSON.parse(JSON.stringify(entry)) as MemoryEntry;
    this.cache.set(`s:${session}`, withEntry(await this.entries(session), own));
    return true;
  }

  async limit(key: string): Promise<LearnedLimit | undefined> {
    return this.cache.get(`l:${key}`) as LearnedLimit | undefined;
  }

  async recall(session: string | null, limitKey: string | null): Promise<{ entries: MemoryEntry[]; limit?: LearnedLimit }> {
    const limit = limitKey === null ? undefined : await this.limit(limitKey);
    return { entries: session === null ? [] : await this.entries(session), ...(limit ? { limit } : {}) };
  }

  async learn(key: string, limit: LearnedLimit): Promise<LearnedLimit> {
    const merged = mergedLimit(await this.limit(key), limit);
    this.cache.set(`l:${key}`, merged);
    return merged;
  }

  async replaceLimit(key: string, limit: LearnedLimit): Promise<void> {
    if (Object.keys(limit).length === 0) this.cache.delete(`l:${key}`);
    else this.cache.set(`l:${key}`, limit);
  }

  async markTenant(tenant: string, reach: Partial<Reach>): Promise<void> {
    this.tenantsMarked = true;
    // Read and written in one turn of the event loop: two marks at once both count.
    const was = (this.cache.get(`t:${tenant}`) as Reach | undefined) ?? NO_REACH;
    this.cache.set(`t:${tenant}`, {
      extending: Math.min(was.extending, reach.extending ?? Infinity),
      disproving: Math.min(was.disproving, reach.disproving ?? Infinity),
    });
  }

  async reachOf(tenant: string): Promise<Reach | undefined> {
    return this.cache.get(`t:${tenant}`) as Reach | undefined;
  }

  mayHaveTenants(): boolean {
    return this.tenantsMarked;
  }

  async acquire(session: string, lease: string, ttlMs: number): Promise<boolean> {
    if (this.leases.has(session)) return false;
    let free!: () => void;
    const freed = new Promise<void>((resolve) => (free = resolve));
    const expiry = setTimeout(() => this.drop(session, lease), ttlMs);
    expiry.unref();
    this.leases.set(session, { token: lease, freed, free, expiry });
    return true;
  }

  async renew(session: string, lease: string, ttlMs: number): Promise<boolean> {
    const held = this.leases.get(session);
    if (held?.token !== lease) return false;
    clearTimeout(held.expiry);
    held.expiry = setTimeout(() => this.drop(session, lease), ttlMs);
    held.expiry.unref();
    return true;
  }

  async release(session: string, lease: string): Promise<void> {
    this.drop(session, lease);
  }

  async whenFree(session: string, ms: number, signal?: AbortSignal): Promise<void> {
    const held = this.leases.get(session);
    if (held) await firstOf(held.freed, ms, signal);
  }

  async close(): Promise<void> {
    this.tenantsMarked = false;
    this.cache.clear();
    for (const [session, held] of this.leases) this.drop(session, held.token);
  }

  /** The lease goes if it is still `lease`'s, and whoever waits for it goes on. */
  private drop(session: string, lease: string): void {
    const held = this.leases.get(session);
    if (held?.token !== lease) return;
    clearTimeout(held.expiry);
    this.leases.delete(session);
    held.free();
  }
}

/** In-process leases: a request of the conversation waits on the promise of the one compacting it. */
interface LocalLease {
  token: string;
  freed: Promise<void>;
  free: () => void;
  expiry: NodeJS.Timeout;
}

/** Resolves with `promise`, after `ms`, or when `signal` aborts, whichever comes first; leaves no timer behind. */
async function firstOf(promise: Promise<unknown>, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted || ms <= 0) return;
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  try {
    await Promise.race([
      promise,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, ms);
        onAbort = resolve;
        signal?.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
  }
}
