import { Cluster } from 'ioredis';
import { mergedLimit, type LearnedLimit } from './limits.js';
import { connectRedis, type RedisClient } from './redis-client.js';
import type { RedisTarget } from './redis-target.js';
import { withEntry, type MemoryEntry, type MemoryStore, type Reach } from './store.js';

/** A whole operation: a Cluster retries a command on other nodes while slots move, each try with its own timeout. */
const OPERATION_TIMEOUT_MS = 1_000;

function within<T>(promise: Promise<T>, ms = OPERATION_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`no answer from Redis within ${ms} ms`), { code: 'ETIMEDOUT' })), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/*
 * A lease holds its holder's random token (SET NX PX). Renew, free and the entries' write compare, then act,
 * in one script: a replica whose lease expired or was taken after a failover writes nothing.
 */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const FENCED_SET = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3]) return 1 end return 0`;

/**
 * `EXTENDING DISPROVING`, lowered in one script so two replicas' marks keep the smaller of each. A replica
 * of the version before marks '1': that reaches every request, until the key expires.
 */
const NONE = 1e12;
const MARK_TENANT = `local e, d = tonumber(ARGV[1]), tonumber(ARGV[2])
local was = redis.call('GET', KEYS[1])
if was then
  local a, b = string.match(was, '^(%d+) (%d+)$')
  if a then e = math.min(e, tonumber(a)) d = math.min(d, tonumber(b)) else e = 0 d = 0 end
end
redis.call('SET', KEYS[1], string.format('%d %d', e, d), 'EX', ARGV[3])
return 1`;

const LEASE_POLL_MS = 100;

/**
 * The lease key's hash tag is its entries key, so the fenced write is in one slot. Entries, limits and
 * tenant keys are v5's, unchanged: a replica of the version before shares memory during a rolling update.
 */
export class RedisStore implements MemoryStore {
  readonly shared = true;
  private readonly redis: RedisClient;

  constructor(
    target: RedisTarget,
    private readonly ttlSeconds: number,
    // v5: a v4 replica would share one tenant's lesson with every other.
    private readonly prefix = 'compaction-gateway:v5:',
  ) {
    this.redis = connectRedis(target, 'store');
    // Errors surface through the failing commands; this keeps ioredis from printing them.
    this.redis.on('error', () => {});
    if (this.redis instanceof Cluster) this.redis.on('node error', () => {});
  }

  keysOf(session: string): { entries: string; lease: string } {
    const entries = `${this.prefix}s:${session}`;
    return { entries, lease: `{${entries}}:lease` };
  }

  async entries(session: string): Promise<MemoryEntry[]> {
    const text = await within(this.redis.get(this.keysOf(session).entries));
    return text ? (JSON.parse(text) as MemoryEntry[]) : [];
  }

  async remember(session: string, entry: MemoryEntry, lease?: string): Promise<boolean> {
    const keys = this.keysOf(session);
    const text = JSON.stringify(withEntry(await this.entries(session), entry));
    if (lease === undefined) {
      await within(this.redis.set(keys.entries, text, 'EX', this.ttlSeconds));
      return true;
    }
    return (await within(this.redis.eval(FENCED_SET, 2, keys.lease, keys.entries, lease, text, this.ttlSeconds))) === 1;
  }

  async limit(key: string): Promise<LearnedLimit | undefined> {
    const text = await within(this.redis.get(`${this.prefix}l:${key}`));
    return text ? (JSON.parse(text) as LearnedLimit) : undefined;
  }

  async recall(session: string | null, limitKey: string | null): Promise<{ entries: MemoryEntry[]; limit?: LearnedLimit }> {
    const entriesKey = session === null ? null : this.keysOf(session).entries;
    const keys = [entriesKey, limitKey === null ? null : `${this.prefix}l:${limitKey}`].filter((k) => k !== null);
    if (keys.length === 0) return { entries: [] };
    // A Cluster answers MGET only for keys of one slot: there, the reads go out together instead.
    const texts = await within(this.redis instanceof Cluster ? Promise.all(keys.map((k) => this.redis.get(k))) : this.redis.mget(keys));
    const entries = entriesKey === null ? null : texts[0];
    const limit = limitKey === null ? null : texts.at(-1);
    return {
      entries: entries ? (JSON.parse(entries) as MemoryEntry[]) : [],
      ...(limit ? { limit: JSON.parse(limit) as LearnedLimit } : {}),
    };
  }

  async learn(key: string, limit: LearnedLimit): Promise<LearnedLimit> {
    const merged = mergedLimit(await this.limit(key), limit);
    await this.replaceLimit(key, merged);
    return merged;
  }

  async replaceLimit(key: string, limit: LearnedLimit): Promise<void> {
    if (Object.keys(limit).length === 0) await within(this.redis.del(`${this.prefix}l:${key}`));
    else await within(this.redis.set(`${this.prefix}l:${key}`, JSON.stringify(limit), 'EX', this.ttlSeconds));
  }

  async markTenant(tenant: string, reach: Partial<Reach>): Promise<void> {
    const size = (n: number | undefined) => String(Math.min(n ?? NONE, NONE));
    await within(
      this.redis.eval(MARK_TENANT, 1, `${this.prefix}t:${tenant}`, size(reach.extending), size(reach.disproving), this.ttlSeconds),
    );
  }

  async reachOf(tenant: string): Promise<Reach | undefined> {
    const text = await within(this.redis.get(`${this.prefix}t:${tenant}`));
    if (text === null) return undefined;
    const sizes = /^(\d+) (\d+)$/.exec(text);
    if (!sizes) return { extending: 0, disproving: 0 };
    const size = (n: string) => (Number(n) >= NONE ? Infinity : Number(n));
    return { extending: size(sizes[1]), disproving: size(sizes[2]) };
  }

  /** Another replica may have remembered any tenant: always ask Redis. */
  mayHaveTenants(): boolean {
    return true;
  }

  async acquire(session: string, lease: string, ttlMs: number): Promise<boolean> {
    return (await within(this.redis.set(this.keysOf(session).lease, lease, 'PX', ttlMs, 'NX'))) === 'OK';
  }

  async renew(session: string, lease: string, ttlMs: number): Promise<boolean> {
    return (await within(this.redis.eval(RENEW, 1, this.keysOf(session).lease, lease, ttlMs))) === 1;
  }

  async release(session: string, lease: string): Promise<void> {
    await within(this.redis.eval(RELEASE, 1, this.keysOf(session).lease, lease));
  }

  /**
   * A poll: pub/sub would need a subscriber connection per replica (per node, in a cluster) and could
   * miss its message in a failover, so it would need this poll behind it anyway.
   */
  async whenFree(session: string, ms: number, signal?: AbortSignal): Promise<void> {
    const until = performance.now() + ms;
    const key = this.keysOf(session).lease;
    while (!signal?.aborted && performance.now() < until) {
      if ((await within(this.redis.exists(key))) === 0) return;
      await new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.min(LEASE_POLL_MS, until - performance.now()))));
    }
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
