import pino from 'pino';
import { Agent } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { createMemory, type CompactionMemory } from '../../src/memory/index.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { serve } from '../../src/rescue/index.js';
import { readIncoming } from '../../src/rescue/request.js';
import { startStandIn } from '../helpers/provider.js';
import { HAVE_REDIS, redisCliAsync, startRedis, until } from '../helpers/redis.js';
import { rescueContext } from '../helpers/rescue-context.js';
import { parseCompactionHeader, toolTurnsBody } from '../helpers/rescue.js';
import type { StrictChat } from '../helpers/strict-chat.js';

/*
 * After a tenant and model overflowed once, a request far below every limit it could meet, and
 * extending no remembered compaction, costs what it costs on a fresh gateway (issue 47): its body
 * is not read (not loaded, not parsed), its tenant not looked up, nothing fingerprinted, and its
 * acceptance not noted. Counted through the request's own reader and the memory's methods; a
 * request that does extend a remembered compaction is still compacted ahead. With Redis, what
 * memory holds for a tenant is read from Redis, in one command a request, by every replica.
 */

let upstream: StrictChat;
const agents: Agent[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(agents.splice(0).map((a) => a.close()));
  await upstream?.close();
});

const TENANT = { authorization: 'Bearer sk-client' };
/** Bodies over this are refused with OpenAI's context_length_exceeded (4 bytes a token). */
const LIMIT = 16_000;

async function startRefusing(): Promise<void> {
  upstream = await startStandIn({ provider: 'chat', limitBytes: LIMIT });
}

/** What one request cost the gateway beyond forwarding it: body reads, and each memory operation. */
interface Reads {
  loads: number;
  parses: number;
  memory: Record<string, number>;
}

const MEMORY_OPERATIONS = ['reachOf', 'thread', 'remembered', 'accepted', 'lease'] as const;

async function run(
  body: unknown,
  memory: CompactionMemory | null,
  windows?: Array<{ model: string; tokens: number; completionCounted: boolean }>,
): Promise<{ status: number; header?: Record<string, unknown>; reads: Reads }> {
  const config = validateConfig({
    upstream: { url: upstream.baseUrl, windows },
    summarizer: { maxInputTokens: 500_000 },
    memory: { enabled: true },
    compaction: { mask: false },
  });
  const dispatcher = new Agent();
  agents.push(dispatcher);
  const incoming = readIncoming(Buffer.from(JSON.stringify(body)), undefined);
  const loads = vi.spyOn(incoming, 'load');
  const parses = vi.spyOn(incoming, 'json', 'get');
  const spies = memory ? MEMORY_OPERATIONS.map((name) => [name, vi.spyOn(memory, name)] as const) : [];
  const ctx = rescueContext({
    config,
    dispatcher,
    memory,
    incoming,
    headers: TENANT,
    clientHeaders: TENANT,
    notes: { model: 'fake-model' },
  });
  const outcome = await serve(ctx, () => false);
  for await (const _ of outcome.answer.response.body);
  // What a request's acceptance notes is not waited for: it has had its turn once the answer is read.
  await new Promise((r) => setImmediate(r));
  const reads = {
    loads: loads.mock.calls.length,
    parses: parses.mock.calls.length,
    memory: Object.fromEntries(spies.map(([name, spy]) => [name, spy.mock.calls.length])),
  };
  vi.restoreAllMocks();
  return { status: outcome.answer.response.status, header: outcome.header ? parseCompactionHeader(outcome.header) : undefined, reads };
}

const NOTHING: Reads = { loads: 0, parses: 0, memory: Object.fromEntries(MEMORY_OPERATIONS.map((name) => [name, 0])) };
const small = () => ({ model: 'fake-model', messages: [{ role: 'user', content: 'What does the build script do?' }], max_tokens: 100 });

it('after one refusal nothing could shrink, a small request of that tenant and model is read no more than on a fresh gateway', async () => {
  await startRefusing();
  const memory = createMemory(
    validateConfig({ upstream: { url: upstream.baseUrl }, memory: { enabled: true } }),
    createMetrics(),
    pino({ level: 'silent' }),
  )!;
  expect((await run(small(), memory)).reads).toEqual(NOTHING);

  // One user message of 20 KB: refused, and nothing in it can be compacted.
  const refused = await run({ model: 'fake-model', messages: [{ role: 'user', content: 'x'.repeat(20_000) }], max_tokens: 100 }, memory);
  expect(refused.status).toBe(400);
  expect(refused.header).toMatchObject({ outcome: 'not_shrunk' });
  expect(refused.reads.memory.remembered + refused.reads.loads).toBeGreaterThan(0);

  const after = await run(small(), memory);
  expect(after.status).toBe(200);
  expect(after.reads).toEqual(NOTHING);
  // Nearly as large as the refused one, it still cannot disprove the window learned (8 bytes a token of it): not noted either.
  const large = await run({ model: 'fake-model', messages: [{ role: 'user', content: 'y'.repeat(15_000) }], max_tokens: 100 }, memory);
  expect(large.status).toBe(200);
  expect(large.reads.memory.accepted).toBe(0);
  await memory.close();
});

it('after a compaction is remembered, a request smaller than its span is not read; the conversation\u2019s next turn is still compacted ahead', async () => {
  await startRefusing();
  const memory = createMemory(
    validateConfig({ upstream: { url: upstream.baseUrl }, memory: { enabled: true } }),
    createMetrics(),
    pino({ level: 'silent' }),
  )!;
  const turns = (n: number) => toolTurnsBody(n, (t) => `// file ${t}\n${'x'.repeat(90)}`);
  const first = await run(turns(100), memory);
  expect(first.header).toMatchObject({ outcome: 'replayed', trigger: 'rejected' });

  const after = await run(small(), memory);
  expect(after.status).toBe(200);
  expect(after.reads).toEqual(NOTHING);

  const next = await run(turns(110), memory);
  expect(next.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
  expect(next.reads.memory.remembered).toBeGreaterThan(0);
  await memory.close();
});

it('a request under its model\u2019s known window, counting the completion only where the window does, is not read to be made to fit', async () => {
  upstream = await startStandIn({ provider: 'chat' });
  // 10,000 tokens, the completion not counted: a request is made to fit past 95% of it (3 bytes a token until answers say otherwise).
  const windows = [{ model: 'fake-model', tokens: 10_000, completionCounted: false }];
  const sized = (bytes: number) => ({ model: 'fake-model', messages: [{ role: 'user', content: 'z'.repeat(bytes) }], max_tokens: 100 });
  const under = await run(sized(21_000), null, windows);
  expect(under.status).toBe(200);
  expect(under.reads).toMatchObject({ loads: 0, parses: 0 });
  const over = await run(sized(30_000), null, windows);
  expect(over.reads.loads).toBeGreaterThan(0);
});

/** Commands Redis ran since its counts were last reset (CONFIG RESETSTAT), the tests' own left out. */
async function redisCommands(port: number): Promise<Record<string, number>> {
  const stats = await redisCliAsync(port, 'info', 'commandstats');
  const counts = [...stats.matchAll(/^cmdstat_([\w|]+):calls=(\d+)/gm)].map(([, name, calls]) => [name, Number(calls)] as const);
  return Object.fromEntries(counts.filter(([name]) => !/^(config|info)/.test(name)));
}

/** One GET at most: the tenant's reach (none when a slow failure just paused the store, on a loaded machine). */
const atMostOneRead = (commands: Record<string, number>) => Object.entries(commands).every(([name, calls]) => name === 'get' && calls <= 1);

if (!HAVE_REDIS && process.env.CI) throw new Error('redis-server is not installed, and CI needs the Redis tests to run');

describe.skipIf(!HAVE_REDIS)('with Redis, shared by replicas', () => {
  it('a small request of a tenant that only has a learned limit costs what it costs on a fresh gateway: one Redis read, no body read', async () => {
    await startRefusing();
    const redis = await startRedis();
    const config = validateConfig({ upstream: { url: upstream.baseUrl }, memory: { redisUrl: redis.url } });
    const [a, b] = [0, 1].map(() => createMemory(config, createMetrics(), pino({ level: 'silent' }))!);
    try {
      // Each connects in the background (no offline queue): ready once a read of its reaches Redis.
      for (const replica of [a, b]) {
        await redisCliAsync(redis.port, 'config', 'resetstat');
        await until('the replica to reach Redis', 10_000, async () => {
          await replica.reachOf('warm-up');
          return (await redisCommands(redis.port)).get === 1;
        });
      }
      /** One request through replica b, with the commands Redis ran for it (the acceptance's, not waited for, included). */
      const through = async (body: unknown, replica = b) => {
        await redisCliAsync(redis.port, 'config', 'resetstat');
        const r = await run(body, replica);
        await new Promise((resolve) => setTimeout(resolve, 100));
        return { ...r, commands: await redisCommands(redis.port) };
      };
      const fresh = await through(small());
      expect(fresh.status).toBe(200);
      expect(fresh.reads).toEqual({ ...NOTHING, memory: { ...NOTHING.memory, reachOf: 1 } });
      expect(atMostOneRead(fresh.commands)).toBe(true);

      // Refused on the other replica, nothing in it can be compacted: the limit is learned, in Redis.
      const refused = await through({ model: 'fake-model', messages: [{ role: 'user', content: 'x'.repeat(20_000) }], max_tokens: 100 }, a);
      expect(refused.header).toMatchObject({ outcome: 'not_shrunk' });
      expect(Object.keys(refused.commands)).toContain('set');

      const after = await through(small());
      expect(after.status).toBe(200);
      expect(after.reads).toEqual(fresh.reads);
      expect(atMostOneRead(after.commands), JSON.stringify(after.commands)).toBe(true);

      // A compaction replica a remembers is what b reads too: the conversation's next turn goes compacted ahead.
      const turns = (n: number) => toolTurnsBody(n, (t) => `// file ${t}\n${'x'.repeat(90)}`);
      expect((await through(turns(100), a)).header).toMatchObject({ outcome: 'replayed', memory: 'miss' });
      expect((await through(turns(110))).header).toMatchObject({ outcome: 'compacted', trigger: 'proactive', memory: 'hit' });
      const smallAfter = await through(small());
      expect(smallAfter.reads).toEqual(fresh.reads);
      expect(atMostOneRead(smallAfter.commands), JSON.stringify(smallAfter.commands)).toBe(true);
    } finally {
      await Promise.all([a.close(), b.close()]);
      await redis.stop();
    }
  });
});
