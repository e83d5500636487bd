import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeRedis } from '../../src/memory/redis-client.js';
import { HAVE_REDIS, redisCliAsync, startCluster, type TestCluster } from '../helpers/redis.js';
import { overflowAt, sameTurnAtOnce, startReplicas, turn, type Replicas } from './replicas.js';

/*
 * Two gateways sharing a real 3-master Redis Cluster (memory.redis.cluster), started by the test
 * on loopback. CI installs redis-server; a machine without it skips these loudly.
 */
if (!HAVE_REDIS && process.env.CI) throw new Error('redis-server is not installed, and CI needs the Redis Cluster tests to run');
if (!HAVE_REDIS) console.warn('redis-server not found on PATH: skipping the Redis Cluster tests (apt-get install redis-server)');

let cluster: TestCluster | undefined;
let replicas: Replicas | undefined;
beforeAll(async () => {
  if (!HAVE_REDIS) return;
  cluster = await startCluster(3);
  replicas = await startReplicas({ redis: { cluster: cluster.seeds } });
}, 60_000);
afterAll(async () => {
  await replicas?.close();
  await cluster?.stop();
});

/** Every gateway key on every node, with the node that holds it. */
async function keysByNode(): Promise<Array<{ port: number; key: string }>> {
  const found = await Promise.all(
    cluster!.nodes.map(async (node) => {
      const keys = [
        ...(await redisCliAsync(node.port, '--scan', '--pattern', 'compaction-gateway:*')).split('\n'),
        ...(await redisCliAsync(node.port, '--scan', '--pattern', '{compaction-gateway:*')).split('\n'),
      ];
      return keys.filter(Boolean).map((key) => ({ port: node.port, key }));
    }),
  );
  return found.flat();
}

const slotOf = async (key: string) => Number(await redisCliAsync(cluster!.nodes[0].port, 'cluster', 'keyslot', key));

describe.skipIf(!HAVE_REDIS)('compaction memory on a Redis Cluster', () => {
  it('the startup probe reads the cluster', async () => {
    expect(await probeRedis({ kind: 'cluster', nodes: [{ host: '127.0.0.1', port: cluster!.nodes[1].port }], tls: false })).toBeNull();
  });

  it('a summary made through one replica is reused through the other', async () => {
    const r = replicas!;
    expect(await turn(r.a, overflowAt, 'sk-across')).toEqual({ status: 200, memory: 'miss' });
    const calls = r.provider.summarizerCalls().length;
    expect(await turn(r.b, overflowAt + 1, 'sk-across')).toEqual({ status: 200, memory: 'hit' });
    expect(r.provider.summarizerCalls()).toHaveLength(calls);
  });

  it('the same overflowing conversation sent to both replicas at once is summarised exactly once', async () => {
    let lease: { port: number; key: string } | undefined;
    let done = false;
    const watching = (async () => {
      // While the summary is being made, the lease is a key in Redis.
      for (let i = 0; i < 200 && !lease && !done; i++) {
        lease = (await keysByNode()).find((k) => k.key.endsWith(':lease'));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      await sameTurnAtOnce(replicas!, 'sk-at-once');
    } finally {
      done = true;
      await watching;
    }
    expect(lease, 'a lease key seen while the summary was made').toBeDefined();
    // The lease's hash tag is the entries key it guards: one slot, on the node that holds both.
    const entries = lease!.key.replace(/^\{(.*)\}:lease$/, '$1');
    expect(await slotOf(lease!.key)).toBe(await slotOf(entries));
    expect((await keysByNode()).find((k) => k.key === entries)?.port).toBe(lease!.port);
    // and it was freed, by compare-and-delete, once the summary was remembered
    expect((await keysByNode()).filter((k) => k.key.endsWith(':lease'))).toEqual([]);
  });

  it("the gateway's keys spread over the cluster's nodes, in many slots", async () => {
    for (const tenant of ['sk-one', 'sk-two', 'sk-three']) expect((await turn(replicas!.a, overflowAt, tenant)).status).toBe(200);
    const keys = await keysByNode();
    const kinds = new Set(keys.map((k) => /:v\d+:(\w):/.exec(k.key)?.[1]));
    expect(kinds).toEqual(new Set(['s', 'l', 't']));
    expect(new Set(keys.map((k) => k.port)).size).toBeGreaterThanOrEqual(2);
    expect(new Set(await Promise.all(keys.map((k) => slotOf(k.key)))).size).toBeGreaterThan(3);
  });

  it('a master going down mid-session fails no request: memory is lost for its slots, nothing else', async () => {
    const r = replicas!;
    const statuses: number[] = [];
    for (let t = overflowAt; t < overflowAt + 3; t++) statuses.push((await turn(t % 2 ? r.a : r.b, t, 'sk-failing')).status);
    await cluster!.nodes[2].stop();
    for (let t = overflowAt + 3; t < overflowAt + 9; t++) statuses.push((await turn(t % 2 ? r.a : r.b, t, 'sk-failing')).status);
    expect(statuses).toEqual(Array(9).fill(200));
  }, 40_000);
});
