import { afterAll, beforeAll, expect, it } from 'vitest';
import { sameTurnAtOnce, startReplicas, type Replicas } from './replicas.js';

/*
 * In-process memory (no Redis) gives two requests of one conversation in one gateway the same
 * lease as replicas sharing Redis: the second waits for the first's summary and reuses it.
 */

let replicas: Replicas;
beforeAll(async () => {
  replicas = await startReplicas({});
}, 30_000);
afterAll(() => replicas.close());

it('the same overflowing conversation sent twice at once to one gateway is summarised exactly once', async () => {
  const one = { ...replicas, b: replicas.a };
  await sameTurnAtOnce(one, 'sk-twice');
  const metrics = await (await fetch(`${replicas.a.origin}/metrics`)).text();
  expect(metrics).toMatch(/^gateway_memory_lease_waits_total\{result="reused"\} 1$/m);
  expect(replicas.a.logLines().some((l) => l.msg === 'another request is compacting this conversation; waiting for its summary')).toBe(
    true,
  );
});
