import { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import type { ChatMessage } from '../compaction/types.js';

/** One remembered compaction of a conversation. */
export interface MemoryEntry {
  /** How many messages after the leading instructions the summary stands for (pinned ones included). */
  spanLength: number;
  /** Chain digest of those messages (see fingerprint.ts): reuse needs an exact match. */
  spanDigest: string;
  /** Offsets within the span of messages kept verbatim right after the summary (the pinned user message). */
  pinnedOffsets: number[];
  /** The exact summary message that replaced the span. */
  summary: ChatMessage;
  /** How many messages the summary condenses. */
  summarizedCount: number;
  strategy: 'summarize' | 'fallback';
  /** Summarizer calls it took to make, from scratch: what a reuse saves. */
  summarizerCalls: number;
  /** The body size the compaction aimed under. */
  bodyTargetBytes: number;
  createdAt: number;
}

/** What a rejection said about a model's limits. */
export interface LearnedLimit {
  limitTokens?: number;
  bytesPerToken?: number;
  limitBytes?: number;
}

export interface MemoryStore {
  /** The session's entries, newest first. */
  entries(session: string): Promise<MemoryEntry[]>;
  remember(session: string, entry: MemoryEntry): Promise<void>;
  limit(model: string): Promise<LearnedLimit | undefined>;
  learn(model: string, limit: LearnedLimit): Promise<void>;
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
    this.cache.set(`s:${session}`, withEntry(await this.entries(session), entry));
  }

  async limit(model: string): Promise<LearnedLimit | undefined> {
    return this.cache.get(`l:${model}`) as LearnedLimit | undefined;
  }

  async learn(model: string, limit: LearnedLimit): Promise<void> {
    this.cache.set(`l:${model}`, { ...(await this.limit(model)), ...limit });
  }

  async close(): Promise<void> {
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
    private readonly prefix = 'compaction-gateway:v1:',
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

  async limit(model: string): Promise<LearnedLimit | undefined> {
    const text = await this.redis.get(`${this.prefix}l:${model}`);
    return text ? (JSON.parse(text) as LearnedLimit) : undefined;
  }

  async learn(model: string, limit: LearnedLimit): Promise<void> {
    const merged = { ...(await this.limit(model)), ...limit };
    await this.redis.set(`${this.prefix}l:${model}`, JSON.stringify(merged), 'EX', this.ttlSeconds);
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
