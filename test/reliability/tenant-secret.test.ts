import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn } from '../helpers/provider.js';
import { HAVE_REDIS, redisCliAsync, startRedis, until, type TestRedis } from '../helpers/redis.js';
import { parseCompactionHeader, toolTurnsBody } from '../helpers/rescue.js';
import type { StrictChat } from '../helpers/strict-chat.js';
import { tenantOf } from '../../src/memory/fingerprint.js';

/*
 * memory.tenantSecret keys the hash that names each tenant's memory in Redis (an HMAC of its
 * credentials). Whoever reads Redis without the secret cannot tell whose memory an entry is, nor
 * check a leaked key against it: the plain hash of the tenant's credential is nowhere in Redis.
 * Replicas with the same secret share memory; a replica with another secret (or none) sees none
 * of it, which is what setting or changing the secret does to an existing deployment's memory.
 */

const MODEL = 'gpt-4o-mini';
const BODY_LIMIT = 40_000;
const SECRET = 'replicas-share-this-secret-1234';
const CLIENT_KEY = 'sk-tenant-alice-000000000000000000000000';

let redis: TestRedis;
let upstream: StrictChat;
const gateways: TestGateway[] = [];
beforeAll(async () => {
  if (!HAVE_REDIS) return;
  redis = await startRedis();
  // An edge in front of it refuses a body over BODY_LIMIT with its 413 page.
  upstream = await startStandIn({ provider: 'chat', limitBytes: BODY_LIMIT, style: 'edge_413' });
});
afterAll(async () => {
  for (const g of gateways) await g.close();
  await upstream?.close();
  await redis?.stop();
});

async function replica(tenantSecret?: string): Promise<TestGateway> {
  const g = await startGateway({
    upstream: { url: upstream.baseUrl },
    memory: { redisUrl: redis.url, ...(tenantSecret ? { tenantSecret } : {}) },
  });
  gateways.push(g);
  // Its Redis client connects in the background (no offline queue: a command before is a miss).
  const connected = async () =>
    (await redisCliAsync(redis.port, 'client', 'list')).split('\n').filter((l) => / name=compaction-gateway /.test(l)).length;
  await until('the replica to reach Redis', 10_000, async () => (await connected()) >= gateways.length);
  return g;
}

const session = (turns: number) =>
  toolTurnsBody(turns, (t) => `contents of src/f${t}.ts\n${'export const value = compute();\n'.repeat(150)}`, { model: MODEL });

async function turn(g: TestGateway, turns: number): Promise<Record<string, string>> {
  const res = await fetch(`${g.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
    body: JSON.stringify(session(turns)),
  });
  expect(res.status).toBe(200);
  await res.text();
  return parseCompactionHeader(res.headers.get('x-gateway-compaction')) as Record<string, string>;
}

/** Every key in Redis and every value it holds, as text. */
async function redisDump(): Promise<string> {
  const keys = (await redisCliAsync(redis.port, '--scan')).split('\n').filter(Boolean);
  const values = await Promise.all(keys.map((k) => redisCliAsync(redis.port, '--no-raw', 'DUMP', k)));
  return keys.map((k, i) => `${k}\n${values[i]}`).join('\n');
}

describe.skipIf(!HAVE_REDIS)('memory.tenantSecret', () => {
  it('replicas with the secret share memory, and Redis holds no plain hash of the credential', async () => {
    const a = await replica(SECRET);
    expect(await turn(a, 12)).toMatchObject({ outcome: 'replayed' });
    // Remembered once the rescue's answer is out.
    await until('the rescue remembered in Redis', 5_000, async () => (await redisCliAsync(redis.port, '--scan')).length > 0);
    const b = await replica(SECRET);
    expect(await turn(b, 13)).toMatchObject({ outcome: 'compacted', trigger: 'proactive', memory: 'hit' });

    const dump = await redisDump();
    expect(dump.length).toBeGreaterThan(0);
    const plain = tenantOf({ authorization: `Bearer ${CLIENT_KEY}` })!;
    const keyed = tenantOf({ authorization: `Bearer ${CLIENT_KEY}` }, '', SECRET)!;
    expect(keyed).not.toBe(plain);
    expect(dump).not.toContain(plain);
    expect(dump).not.toContain(plain.slice(0, 16));
    expect(dump).not.toContain(CLIENT_KEY);
  });

  it('a replica with another secret, or none, sees none of that memory: the turn is rescued afresh', async () => {
    for (const other of ['another-secret-entirely-5678', undefined]) {
      const c = await replica(other);
      expect(await turn(c, 13), String(other)).toMatchObject({ outcome: 'replayed' });
    }
  });
});
