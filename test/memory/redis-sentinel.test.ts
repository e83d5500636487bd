import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeRedis } from '../../src/memory/redis-client.js';
import { HAVE_REDIS, redisCliAsync, startSentinelSet, type TestSentinelSet } from '../helpers/redis.js';
import { overflowAt, sameTurnAtOnce, startReplicas, turn, type Replicas } from './replicas.js';

/*
 * Two gateways sharing memory through a real Sentinel set (memory.redis.sentinels + name): a
 * master, its replica and 3 sentinels, started by the test on loopback. CI installs redis-server
 * (which runs as a sentinel with --sentinel); a machine without it skips these loudly.
 */
if (!HAVE_REDIS && process.env.CI) throw new Error('redis-server is not installed, and CI needs the Redis Sentinel tests to run');
if (!HAVE_REDIS) console.warn('redis-server not found on PATH: skipping the Redis Sentinel tests (apt-get install redis-server)');

let set: TestSentinelSet | undefined;
let replicas: Replicas | undefined;
beforeAll(async () => {
  if (!HAVE_REDIS) return;
  set = await startSentinelSet();
  replicas = await startReplicas({ redis: { sentinels: set.sentinels, name: set.name } });
}, 60_000);
afterAll(async () => {
  await replicas?.close();
  await set?.stop();
});

const sentinelsOf = () => set!.sentinels.map((s) => ({ host: '127.0.0.1', port: Number(s.split(':')[1]) }));

describe.skipIf(!HAVE_REDIS)('compaction memory through Redis Sentinel', () => {
  it('the startup probe finds the master by its name, and says when the sentinels know no such name', async () => {
    expect(await probeRedis({ kind: 'sentinel', sentinels: sentinelsOf(), name: set!.name, tls: false })).toBeNull();
    expect(await probeRedis({ kind: 'sentinel', sentinels: sentinelsOf(), name: 'nosuchmaster', tls: false })).toBe(
      'the sentinels know no master by that name (memory.redis.name)',
    );
  });

  it('the same overflowing conversation sent to both replicas at once is summarised exactly once', async () => {
    await sameTurnAtOnce(replicas!, 'sk-at-once');
    // The entries are on the master, and the lease is gone from it.
    const keys = (await redisCliAsync(set!.master.port, '--scan', '--pattern', '*compaction-gateway:*')).split('\n');
    expect(keys.some((k) => /^compaction-gateway:v5:s:/.test(k))).toBe(true);
    expect(keys.filter((k) => k.endsWith(':lease'))).toEqual([]);
  });

  it('the master killed mid-session: the sentinels promote the replica, no request fails, and memory works again on the new master', async () => {
    const r = replicas!;
    const tenant = 'sk-failover';
    const statuses: number[] = [];
    let t = overflowAt;
    for (; t < overflowAt + 3; t++) statuses.push((await turn(t % 2 ? r.a : r.b, t, tenant)).status);
    const before = await set!.masterPort();
    await set!.master.stop();
    // Turns go on while the sentinels notice (1 s), elect and promote: each is served, without memory meanwhile.
    let memory: unknown;
    const deadline = performance.now() + 25_000;
    for (; performance.now() < deadline && ((await set!.masterPort()) === before || memory !== 'hit'); t++) {
      const res = await turn(t % 2 ? r.a : r.b, t, tenant);
      statuses.push(res.status);
      memory = res.memory;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(
      statuses.every((s) => s === 200),
      `statuses ${statuses.join(',')}`,
    ).toBe(true);
    expect(await set!.masterPort()).toBe(set!.replica.port);
    // Both replicas followed the failover: what one remembers on the new master, the other reuses
    // (once its own client has moved: it may still be reconnecting, or leaving the store alone for a second).
    let after = 0;
    await expect
      .poll(
        async () => {
          const tenant = `sk-after-${++after}`;
          const first = await turn(r.a, overflowAt, tenant);
          const next = await turn(r.b, overflowAt + 1, tenant);
          return [first.status, next.status, next.memory];
        },
        { timeout: 15_000, interval: 300 },
      )
      .toEqual([200, 200, 'hit']);
    expect((await redisCliAsync(set!.replica.port, '--scan', '--pattern', 'compaction-gateway:v5:s:*')).split('\n').length).toBeGreaterThan(
      0,
    );
  }, 60_000);
});
