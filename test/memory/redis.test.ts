import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { HAVE_REDIS, startRedis, type TestRedis } from '../helpers/redis.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { LIMIT, firstOverflow, sessionRequest } from './session.js';

// Real redis-server, not mocked. CI installs it; a machine without it skips these loudly,
// except under CI, where a missing redis-server is a failure.
if (!HAVE_REDIS && process.env.CI) throw new Error('redis-server is not installed, and CI needs the Redis tests to run');
if (!HAVE_REDIS) console.warn('redis-server not found on PATH: skipping the Redis memory tests (apt-get install redis-server)');

const request = (turns: number) => sessionRequest(turns);
const overflowAt = firstOverflow();

let provider: StandIn;
let redis: TestRedis;
const gateways: TestGateway[] = [];
afterEach(async () => {
  for (const g of gateways.splice(0)) await g.close();
  await provider.close();
  await redis.stop();
});

async function replica(compaction: Record<string, unknown> = {}): Promise<TestGateway> {
  const g = await startGateway({
    upstream: { url: provider.baseUrl },
    summarizer: { maxInputTokens: 500_000 },
    memory: { redisUrl: redis.url },
    compaction,
  });
  gateways.push(g);
  // A replica's Redis connection opens in the background, and until it is up every lookup is a
  // miss (no offline queue, by design). Wait until Redis sees every replica connected.
  await expect.poll(() => connectedClients(redis.url), { timeout: 10_000, interval: 50 }).toBeGreaterThanOrEqual(gateways.length);
  return g;
}

/** Clients connected to the Redis at `url`, not counting the one asking. */
async function connectedClients(url: string): Promise<number> {
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {});
  try {
    await probe.connect();
    const list = String(await probe.client('LIST'));
    return list.split('\n').filter((line) => line.trim()).length - 1;
  } catch {
    return 0;
  } finally {
    probe.disconnect();
  }
}

const send = (g: TestGateway, turns: number) => postChat(g, request(turns), { authorization: 'Bearer sk-shared' });

describe.skipIf(!HAVE_REDIS)('compaction memory in Redis', () => {
  it.each([
    ['a summary', { mask: false }, 'summarize'],
    ['a masked span', {}, 'mask'],
  ] as const)('%s made through one replica is reused through another', async (_what, compaction, strategy) => {
    redis = await startRedis();
    provider = await startStandIn({ limitBytes: LIMIT });
    const [a, b] = [await replica(compaction), await replica(compaction)];

    const first = await send(a, overflowAt);
    expect(parseCompactionHeader(first.headers.get('x-gateway-compaction'))).toMatchObject({
      outcome: 'replayed',
      memory: 'miss',
      strategy,
    });
    const summarizer = provider.summarizerCalls().length;
    if (strategy === 'summarize') expect(summarizer).toBeGreaterThanOrEqual(1);
    else expect(summarizer).toBe(0);

    const second = await send(b, overflowAt + 1);
    expect(second.status).toBe(200);
    // The other replica knows the conversation from Redis: it sends it compacted ahead, once.
    expect(parseCompactionHeader(second.headers.get('x-gateway-compaction'))).toMatchObject({
      trigger: 'proactive',
      memory: 'hit',
      strategy,
    });
    expect(provider.calls('chat')).toHaveLength(3);
    expect(provider.summarizerCalls()).toHaveLength(summarizer);
  });

  it('with Redis stopped mid-test, requests still succeed (without memory), and it is counted', async () => {
    redis = await startRedis();
    provider = await startStandIn({ limitBytes: LIMIT });
    const g = await replica();
    expect((await send(g, overflowAt)).status).toBe(200);

    await redis.stop();
    const started = performance.now();
    const res = await send(g, overflowAt + 1);
    expect(res.status).toBe(200);
    expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed', memory: 'miss' });
    expect(performance.now() - started).toBeLessThan(5_000);
    const metrics = await (await fetch(`${g.origin}/metrics`)).text();
    expect(metrics).toMatch(/gateway_memory_store_errors_total\{operation="read"\} [1-9]/);
    // Said once per outage, not once per failed operation: how many operations failed before
    // this point depends on timing, but a second warning needs a recovery line before it.
    expect(outageLines(g)).toContain('down');
    expect(outageLines(g).join(' ')).not.toMatch(/down down/);

    // a normal request is not slowed or broken either
    expect((await postChat(g, request(3))).status).toBe(200);
    // and memory comes back with Redis (empty after its restart: a miss remembers, then a hit)
    await redis.start();
    let turn = overflowAt + 2;
    await expect
      .poll(
        async () => {
          const r = await send(g, turn++);
          return parseCompactionHeader(r.headers.get('x-gateway-compaction')).memory;
        },
        { timeout: 20_000, interval: 300 },
      )
      .toBe('hit');
    expect(outageLines(g)).toContain('up');
    expect(outageLines(g).join(' ')).not.toMatch(/down down|up up/);
  }, 60_000);

  it("the test helper's stop() returns when called twice (a killed process has signalCode, not exitCode)", async () => {
    redis = await startRedis();
    provider = await startStandIn({ limitBytes: LIMIT });
    await redis.stop();
    const again = await Promise.race([redis.stop().then(() => 'returned'), sleep(2_000).then(() => 'hung')]);
    expect(again).toBe('returned');
  });
});

/** The memory store's outage and recovery log lines, in order: 'down' or 'up'. */
function outageLines(g: TestGateway): string[] {
  return g
    .logLines()
    .filter((l) => /memory store (failed|is reachable again)/.test(l.msg))
    .map((l) => (/failed/.test(l.msg) ? 'down' : 'up'));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
