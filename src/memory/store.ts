import { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import type { BoundMemory } from '../compaction/bound.js';
import type { Trail } from '../compaction/trail.js';
import { mergedLimit, type LearnedLimit } from './limits.js';

export type { LearnedLimit } from './limits.js';

/** One remembered compaction of a conversation. */
export interface MemoryEntry {
  /** How many items after the kept prefix (instructions, opening input) the summary stands for, pinned ones included. */
  spanLength: number;
  /** Chain digest of those items (see fingerprint.ts): reuse needs an exact match. */
  spanDigest: string;
  /** Offsets within the span of items kept verbatim right after the summary (the pinned user input). */
  pinnedOffsets: number[];
  /** The exact summary item that replaced the span (null when several did: see summaryItems), and its text (for an incremental summary). */
  summary: unknown;
  /** Every item that replaced the span: one summary, or the provider's compaction window. */
  summaryItems?: unknown[];
  summaryText: string;
  /** The trail of the work the summary ends with (absent in entries from before it had one). */
  trail?: Trail;
  /** How many items the summary condenses. */
  summarizedCount: number;
  strategy: 'mask' | 'summarize' | 'fallback' | 'provider';
  /** Summarizer calls it took to make, from scratch: what a reuse saves. */
  summarizerCalls: number;
  /**
   * The compacted prefix's bound provider state (signed thinking): from where it is fresh, and
   * whether all of it goes stripped. Absent in entries from before: then all of it is stale.
   */
  bound?: BoundMemory;
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
  remember(session: string, entry: MemoryEntry): Promise<void>;
  /** What was learned under a key (one tenant, upstream and model: see CompactionMemory). */
  limit(key: string): Promise<LearnedLimit | undefined>;
  /** Adds a lesson to what is known under the key (limits.ts mergedLimit). */
  learn(key: string, limit: LearnedLimit): Promise<void>;
  /** Replaces what is known under the key (a loosened limit); an empty one forgets it. */
  replaceLimit(key: string, limit: LearnedLimit): Promise<void>;
  /** Marks a tenant as having remembered compactions, and asks whether one has. */
  markTenant(tenant: string): Promise<void>;
  hasTenant(tenant: string): Promise<boolean>;
  /**
   * False only when no tenant can have anything remembered: every request then skips hashing its
   * credential and asking. A store shared between replicas can never say so.
   */
  mayHaveTenants(): boolean;
  close(): Promise<void>;
}

/** Entries kept per conversation: later turns extend the newest; older ones rarely match again. */
export const ENTRIES_PER_SESSION = 4;

function withEntry(list: MemoryEntry[], entry: MemoryEntry): MemoryEntry[] {
  const others = list.filter((e) => e.spanDigest !== entry.spanDigest);
  return [entry, ...others].slice(0, ENTRIES_PER_SESSION);
}

/** In-process: a bounded LRU, by bytes, with a TTL. Nothing to set up. */
export class LocalStore implements MemoryStore {
  private readonly cache: LRUCache<string, MemoryEntry[] | LearnedLimit>;
  /** Set by the first markTenant: from then on every request asks (entries expire; the flag need not). */
  private tenantsMarked = false;

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

  async remember(session: string, entry: MemoryEntry): Promise<void> {
    // A copy of its own, as Redis keeps one: a string parsed out of a request is a slice of the
    // request's whole text (V8's JSON.parse), and an entry holding one line of it would keep a
    // 20 MB body alive for as long as it is remembered.
    const own = JSON.parse(JSON.stringify(entry)) as MemoryEntry;
    this.cache.set(`s:${session}`, withEntry(await this.entries(session), own));
  }

  async limit(key: string): Promise<LearnedLimit | undefined> {
    return this.cache.get(`l:${key}`) as LearnedLimit | undefined;
  }

  async learn(key: string, limit: LearnedLimit): Promise<void> {
    this.cache.set(`l:${key}`, mergedLimit(await this.limit(key), limit));
  }

  async replaceLimit(key: string, limit: LearnedLimit): Promise<void> {
    if (Object.keys(limit).length === 0) this.cache.delete(`l:${key}`);
    else this.cache.set(`l:${key}`, limit);
  }

  async markTenant(tenant: string): Promise<void> {
    this.tenantsMarked = true;
    this.cache.set(`t:${tenant}`, {});
  }

  async hasTenant(tenant: string): Promise<boolean> {
    return this.cache.has(`t:${tenant}`);
  }

  mayHaveTenants(): boolean {
    return this.tenantsMarked;
  }

  async close(): Promise<void> {
    this.tenantsMarked = false;
    this.cache.clear();
  }
}

/**
 * Shared by every replica pointed at the same Redis. Commands fail at once while Redis is down
 * (no offline queue) so a request never waits on it; the caller treats a failure as a miss.
 */
export class RedisStore implements MemoryStore {
  private readonly redis: Redis;

  constructor(
    url: string,
    private readonly ttlSeconds: number,
    // v5: sessions are keyed by model too, and learned limits by tenant, upstream and model (a
    // hash), with the size of the request that stated each; a v4 replica would share one tenant's
    // lesson with every other. (v4: entries may be masked spans and carry a trail.)
    private readonly prefix = 'compaction-gateway:v5:',
  ) {
    this.redis = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: 500,
      connectTimeout: 1_000,
      retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
      lazyConnect: false,
    });
    // Errors surface through the failing commands; this keeps ioredis from printing them.
    this.redis.on('error', () => {});
  }

  async entries(session: string): Promise<MemoryEntry[]> {
    const text = await this.redis.get(`${this.prefix}s:${session}`);
    return text ? (JSON.parse(text) as MemoryEntry[]) : [];
  }

  async remember(session: string, entry: MemoryEntry): Promise<void> {
    const list = withEntry(await this.entries(session), entry);
    await this.redis.set(`${this.prefix}s:${session}`, JSON.stringify(list), 'EX', this.ttlSeconds);
  }

  async limit(key: string): Promise<LearnedLimit | undefined> {
    const text = await this.redis.get(`${this.prefix}l:${key}`);
    return text ? (JSON.parse(text) as LearnedLimit) : undefined;
  }

  async learn(key: string, limit: LearnedLimit): Promise<void> {
    await this.replaceLimit(key, mergedLimit(await this.limit(key), limit));
  }

  async replaceLimit(key: string, limit: LearnedLimit): Promise<void> {
    if (Object.keys(limit).length === 0) await this.redis.del(`${this.prefix}l:${key}`);
    else await this.redis.set(`${this.prefix}l:${key}`, JSON.stringify(limit), 'EX', this.ttlSeconds);
  }

  async markTenant(tenant: string): Promise<void> {
    await this.redis.set(`${this.prefix}t:${tenant}`, '1', 'EX', this.ttlSeconds);
  }

  async hasTenant(tenant: string): Promise<boolean> {
    return (await this.redis.exists(`${this.prefix}t:${tenant}`)) === 1;
  }

  /** Another replica may have remembered any tenant: always ask Redis. */
  mayHaveTenants(): boolean {
    return true;
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
