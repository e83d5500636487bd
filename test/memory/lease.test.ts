import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/memory/redis.js';
import { LocalStore, type MemoryEntry, type MemoryStore } from '../../src/memory/store.js';
import { HAVE_REDIS, redisCli, startRedis, until, type TestRedis } from '../helpers/redis.js';

/*
 * The lease a conversation's compaction holds (src/memory/store.ts MemoryStore), the same on
 * both stores: taken by one holder at a time, freed or renewed only by its holder, and a write
 * fenced by it lands only while it is the holder's. The Redis store runs against a real
 * redis-server.
 */

if (!HAVE_REDIS && process.env.CI) throw new Error('redis-server is not installed, and CI needs the Redis tests to run');
if (!HAVE_REDIS) console.warn('redis-server not found on PATH: skipping the Redis lease tests (apt-get install redis-server)');

const entry = (spanLength: number): MemoryEntry => ({
  spanLength,
  spanDigest: `d${spanLength}`,
  pinnedOffsets: [],
  summary: { role: 'user', content: `summary ${spanLength}` },
  summaryText: `summary ${spanLength}`,
  summarizedCount: spanLength,
  strategy: 'summarize',
  summarizerCalls: 1,
  fitBytes: 1000,
  aimBytes: 600,
  createdAt: 0,
});

let redis: TestRedis | undefined;
let redisStore: RedisStore | undefined;
beforeAll(async () => {
  if (!HAVE_REDIS) return;
  redis = await startRedis();
  redisStore = new RedisStore({ kind: 'node', url: redis.url, tls: false }, 60);
  // It connects in the background; until then every command fails (no offline queue).
  await until('the store to reach Redis', 10_000, () =>
    redisStore!.entries('warm-up').then(
      () => true,
      () => false,
    ),
  );
});
afterAll(async () => {
  await redisStore?.close();
  await redis?.stop();
});

const local = new LocalStore(1_000_000, 60);
const stores: Array<[string, () => MemoryStore]> = [
  ['in-process', () => local],
  ...(HAVE_REDIS ? [['Redis', () => redisStore!] as [string, () => MemoryStore]] : []),
];
let n = 0;
const fresh = () => `conversation-${++n}`;

describe.each(stores)('a conversation lease, %s', (_name, store) => {
  it('is held by one at a time, and freed only by its holder', async () => {
    const s = fresh();
    expect(await store().acquire(s, 'a', 10_000)).toBe(true);
    expect(await store().acquire(s, 'b', 10_000)).toBe(false);
    // b's compare-and-delete leaves a's lease alone
    await store().release(s, 'b');
    expect(await store().acquire(s, 'c', 10_000)).toBe(false);
    expect(await store().renew(s, 'b', 10_000)).toBe(false);
    expect(await store().renew(s, 'a', 10_000)).toBe(true);
    await store().release(s, 'a');
    expect(await store().acquire(s, 'b', 10_000)).toBe(true);
    await store().release(s, 'b');
  });

  it("writes fenced by a lease land only while it is the holder's", async () => {
    const s = fresh();
    expect(await store().acquire(s, 'a', 10_000)).toBe(true);
    expect(await store().remember(s, entry(1), 'b')).toBe(false);
    expect(await store().entries(s)).toEqual([]);
    expect(await store().remember(s, entry(2), 'a')).toBe(true);
    await store().release(s, 'a');
    // freed: a's fenced write no longer lands
    expect(await store().remember(s, entry(3), 'a')).toBe(false);
    expect((await store().entries(s)).map((e) => e.spanLength)).toEqual([2]);
  });

  it("an expired lease is another's to take; its old holder can neither write, renew nor free the new one", async () => {
    const s = fresh();
    expect(await store().acquire(s, 'a', 150)).toBe(true);
    // whenFree ends when the lease expires (well before its own bound of 10 s)
    await store().whenFree(s, 10_000);
    expect(await store().acquire(s, 'b', 10_000)).toBe(true);
    expect(await store().renew(s, 'a', 10_000)).toBe(false);
    expect(await store().remember(s, entry(1), 'a')).toBe(false);
    await store().release(s, 'a');
    expect(await store().acquire(s, 'c', 10_000)).toBe(false);
    await store().release(s, 'b');
  });

  it('a waiter goes on when the holder frees the lease, not at the end of its bound', async () => {
    const s = fresh();
    expect(await store().acquire(s, 'a', 30_000)).toBe(true);
    let freed = false;
    const waiting = store()
      .whenFree(s, 30_000)
      .then(() => freed);
    await new Promise((r) => setTimeout(r, 150));
    freed = true;
    await store().release(s, 'a');
    // resolved after the release (a wait to its 30 s bound would fail the test's 5 s timeout)
    expect(await waiting).toBe(true);
  });

  it('a wait ends at its bound while the lease is still held', async () => {
    const s = fresh();
    expect(await store().acquire(s, 'a', 30_000)).toBe(true);
    await store().whenFree(s, 200);
    expect(await store().acquire(s, 'b', 30_000)).toBe(false);
    await store().release(s, 'a');
  });
});

describe.skipIf(!HAVE_REDIS)('the lease in Redis', () => {
  it('is a key with an expiry, gone once freed', async () => {
    const s = fresh();
    const keys = redisStore!.keysOf(s);
    await redisStore!.acquire(s, 'a', 10_000);
    expect(redisCli(redis!.port, 'get', keys.lease)).toBe('a');
    const ttl = Number(redisCli(redis!.port, 'pttl', keys.lease));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(10_000);
    await redisStore!.release(s, 'a');
    expect(redisCli(redis!.port, 'exists', keys.lease)).toBe('0');
  });
});

describe.each(stores)('a tenant\u2019s reach and one read of what is remembered, %s', (_name, store) => {
  it('keeps the smaller of each size two marks give (two replicas marking one tenant)', async () => {
    const tenant = `tenant-${++n}`;
    expect(await store().reachOf(tenant)).toBeUndefined();
    await store().markTenant(tenant, { disproving: 32_001 });
    expect(await store().reachOf(tenant)).toEqual({ extending: Infinity, disproving: 32_001 });
    await Promise.all([
      store().markTenant(tenant, { extending: 9_000, disproving: 40_000 }),
      store().markTenant(tenant, { extending: 12_000 }),
    ]);
    expect(await store().reachOf(tenant)).toEqual({ extending: 9_000, disproving: 32_001 });
  });

  it('reads a conversation\u2019s entries and a learned limit together, either left out', async () => {
    const s = fresh();
    const key = `limit-${++n}`;
    expect(await store().recall(s, key)).toEqual({ entries: [] });
    await store().remember(s, entry(2));
    expect(await store().learn(key, { limitTokens: 4000, windowFrom: 20_000 })).toEqual({ limitTokens: 4000, windowFrom: 20_000 });
    expect(await store().recall(s, key)).toEqual({ entries: [entry(2)], limit: { limitTokens: 4000, windowFrom: 20_000 } });
    expect(await store().recall(null, key)).toEqual({ entries: [], limit: { limitTokens: 4000, windowFrom: 20_000 } });
    expect(await store().recall(s, null)).toEqual({ entries: [entry(2)] });
  });
});

describe.skipIf(!HAVE_REDIS)('a tenant\u2019s reach in Redis', () => {
  it('the mark a replica of the version before writes (1) reaches every request until it expires', async () => {
    const tenant = `tenant-${++n}`;
    redisCli(redis!.port, 'set', `compaction-gateway:v5:t:${tenant}`, '1', 'EX', '60');
    expect(await redisStore!.reachOf(tenant)).toEqual({ extending: 0, disproving: 0 });
    await redisStore!.markTenant(tenant, { extending: 9_000 });
    expect(await redisStore!.reachOf(tenant)).toEqual({ extending: 0, disproving: 0 });
    expect(Number(redisCli(redis!.port, 'ttl', `compaction-gateway:v5:t:${tenant}`))).toBeGreaterThan(0);
  });
});
