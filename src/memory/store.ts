import { LRUCache } from 'lru-cache';
import type { RememberedSpan } from '../compaction/recalled.js';
import { mergedLimit, type LearnedLimit } from './limits.js';

export type { LearnedLimit } from './limits.js';

export interface MemoryEntry extends RememberedSpan {
  /** Reuse needs an exact match. */
  spanDigest: string;
  fitBytes: number;
  aimBytes: number;
  /** As the rejection that made it said. */
  bytesPerToken?: number;
  createdAt: number;
}

export interface MemoryStore {
  /** Newest first. */
  entries(session: string): Promise<MemoryEntry[]>;
  /** With `lease`, a fenced write: false, and nothing written, once the lease is not the session's. */
  remember(session: string, entry: MemoryEntry, lease?: string): Promise<boolean>;
  limit(key: string): Promise<LearnedLimit | undefined>;
  recall(session: string | null, limitKey: string | null): Promise<{ entries: MemoryEntry[]; limit?: LearnedLimit }>;
  learn(key: string, limit: LearnedLimit): Promise<LearnedLimit>;
  /** An empty limit forgets it. */
  replaceLimit(key: string, limit: LearnedLimit): Promise<void>;
  /** Each size only falls. */
  markTenant(tenant: string, reach: Partial<Reach>): Promise<void>;
  reachOf(tenant: string): Promise<Reach | undefined>;
  /** A store shared between replicas can never say false. */
  mayHaveTenants(): boolean;
  readonly shared: boolean;
  acquire(session: string, lease: string, ttlMs: number): Promise<boolean>;
  renew(session: string, lease: string, ttlMs: number): Promise<boolean>;
  release(session: string, lease: string): Promise<void>;
  whenFree(session: string, ms: number, signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

/** Smallest request sizes that could extend a remembered compaction / disprove a learned limit; Infinity: none. */
export interface Reach {
  extending: number;
  disproving: number;
}

export const NO_REACH: Readonly<Reach> = { extending: Infinity, disproving: Infinity };

/** Later turns extend the newest; older ones rarely match again. */
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
    // A copy of its own: a string parsed out of a request is a slice of the request's whole text (V8's
    // JSON.parse), and an entry holding one would keep a 20 MB body alive for as long as it is remembered.
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
