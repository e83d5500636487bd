import { Cluster } from 'ioredis';
import { mergedLimit, type LearnedLimit } from './limits.js';
import { connectRedis, type RedisClient } from './redis-client.js';
import type { RedisTarget } from './redis-target.js';
import { withEntry, type MemoryEntry, type MemoryStore, type Reach } from './store.js';

/*
 * The store that keeps the compaction memory in Redis (one node, a Cluster, a Sentinel set). Each
 * command is bounded (a failure is a miss: CompactionMemory.guard), so a request never waits on
 * Redis for longer than OPERATION_TIMEOUT_MS, whatever Redis is doing: down, failing over, resharding.
 */

/**
 * A whole operation, within this: a Cluster retries a command on another node while slots move
 * (MOVED, TRYAGAIN, a node gone), and each try has its own command timeout.
 */
const OPERATION_TIMEOUT_MS = 1_000;

/** `promise`, or a rejection after `ms`: no operation outlasts its bound, whatever the client does. */
function within<T>(promise: Promise<T>, ms = OPERATION_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`no answer from Redis within ${ms} ms`), { code: 'ETIMEDOUT' })), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/*
 * Leases: one compaction of a conversation at a time, across every replica (CompactionMemory.lease).
 * A lease is a key holding its holder's random token, set with NX and an expiry. Only the holder
 * renews or frees it, and only while it is the holder's (compare, then act, in one script), and
 * its write of the conversation's entries checks the same way: a replica whose lease expired, or
 * was lost in a failover and taken by another, writes nothing. Both keys are in one cluster slot.
 */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const FENCED_SET = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3]) return 1 end return 0`;

/**
 * A tenant's reach (store.ts Reach) is `EXTENDING DISPROVING` under its tenant key, each lowered
 * in one script so that two replicas' marks keep the smaller of each; NONE stands for no size. A
 * replica of the version before marks '1': that reaches every request, until the key expires.
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

/** How often a replica waiting for another's lease asks whether it is free. */
const LEASE_POLL_MS = 100;

/**
 * Shared by every replica pointed at the same Redis: one node, a Cluster or a Sentinel set.
 * Commands fail at once while Redis is down or moving (no offline queue) and each operation is
 * bounded, so a request never waits on it; the caller treats a failure as a miss.
 *
 * Keys, each a single-slot key: `PREFIX s:SESSION` (a conversation's entries), `PREFIX l:KEY`
 * (learned limits), `PREFIX t:TENANT` (a tenant has memory, and its reach: MARK_TENANT), and a conversation's lease
 * `{PREFIX s:SESSION}:lease`, whose hash tag is its entries key, so the fenced write of the two is
 * in one slot. The entries, limits and tenant keys are those of v5, unchanged: a replica of the
 * version before shares memory with this one during a rolling update (it takes no lease, and asks
 * only whether a tenant key exists).
 */
export class RedisStore implements MemoryStore {
  readonly shared = true;
  private readonly redis: RedisClient;

  constructor(
    target: RedisTarget,
    private readonly ttlSeconds: number,
    // v5: sessions are keyed by model too, and learned limits by tenant, upstream and model (a
    // hash), with the size of the request that stated each; a v4 replica would share one tenant's
    // lesson with every other. (v4: entries may be masked spans and carry a trail.)
    private readonly prefix = 'compaction-gateway:v5:',
  ) {
    this.redis = connectRedis(target, 'store');
    // Errors surface through the failing commands; this keeps ioredis from printing them.
    this.redis.on('error', () => {});
    if (this.redis instanceof Cluster) this.redis.on('node error', () => {});
  }

  /** The keys of a conversation (exported for the tests that look into Redis). */
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
   * Asks every LEASE_POLL_MS: a wait happens only when two replicas compact one conversation at
   * once, and costs at most ms / LEASE_POLL_MS small reads. Pub/sub would need a subscriber
   * connection per replica (per node, in a cluster) and could miss its message in a failover, so
   * it would need this poll behind it anyway.
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
