import { afterEach, describe, expect, it } from 'vitest';
import { agentConversationBody, tinyTurnsBody } from '../helpers/hostile-bodies.js';
import { boundedClient, pollHealth, startHostileGateway, type HostileGateway } from '../helpers/hostile-child.js';
import type { HostileStandIn } from '../helpers/hostile-standin.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * One huge rescue must not stall every other client: while the built gateway (a child process,
 * so that the poller's own event loop is not the one being measured) compacts a huge
 * conversation, a /healthz poller keeps being answered. The compaction once held the event loop
 * for seconds at a time: 6.7-8.9 s for 100k messages, 2.6 s for four 20 MB conversations at once. The bound
 * below is generous, for a loaded 2-core machine; the worst latency measured is reported.
 */

const HEAP_MB = 384;
/** Several times the 80-200 ms measured (the aim is ~100-300 ms), far below what the old code took. */
const WORST_HEALTHZ_MS = 1_000;

let standIn: HostileStandIn | undefined;
let gateway: HostileGateway | undefined;
let client: ReturnType<typeof boundedClient> | undefined;
afterEach(async () => {
  await client?.close();
  await gateway?.stop();
  await standIn?.close();
  client = gateway = standIn = undefined;
});

/** Sends the bodies at once with /healthz polled every 15 ms throughout; the answers and what the poller saw. */
async function sendWhilePolled(bodies: Buffer[], heapMb = HEAP_MB, env: Record<string, string> = {}) {
  standIn = await startStandIn({ provider: 'hostile' });
  gateway = await startHostileGateway(standIn.baseUrl, heapMb, env);
  client = boundedClient(50_000);
  const poller = pollHealth(gateway.origin, { everyMs: 15, maxPolls: 4_000 });
  const started = performance.now();
  const answers = await Promise.all(
    bodies.map((body) => client!.post(`${gateway!.origin}/v1/chat/completions`, body).catch((err: Error) => err)),
  );
  const wallMs = Math.round(performance.now() - started);
  const polled = await poller.stop();
  return { answers, polled, wallMs };
}

/** Rescues the bodies at once with /healthz polled throughout; the first answer's outcome and what the poller saw. */
async function rescueWhilePolled(...bodies: Buffer[]) {
  // What is measured is the event loop through rescues, not the budget: one that takes them all
  // (the default, half the heap, sheds one of four 20 MB conversations on some Nodes).
  const { answers, polled, wallMs } = await sendWhilePolled(bodies, undefined, { COMPACTION_RESCUE_BUDGET_BYTES: String(4 * 2 ** 30) });
  const headers = answers.map((answer) => {
    expect(answer, gateway!.crashText()).not.toBeInstanceOf(Error);
    const a = answer as Exclude<typeof answer, Error>;
    expect(a.status, a.body.toString().slice(0, 300)).toBe(200);
    const header = parseCompactionHeader(a.headers['x-gateway-compaction'] as string);
    expect(header.outcome).toBe('replayed');
    return header;
  });
  return { header: headers[0], polled, wallMs, summarizerCalls: standIn!.summarizerCalls() };
}

describe('a huge compaction while others are served', () => {
  it('100k tiny messages: /healthz keeps answering', { timeout: 60_000 }, async () => {
    const r = await rescueWhilePolled(tinyTurnsBody(100_000, 0));
    console.log(
      `100k messages: worst /healthz ${r.polled.worstMs} ms over ${r.polled.polls} polls, rescue ${r.wallMs} ms (${r.header.strategy}, ${r.summarizerCalls} summarizer calls)`,
    );
    expect(r.polled.failures).toBe(0);
    expect(r.polled.worstMs).toBeLessThan(WORST_HEALTHZ_MS);
  });

  it('four 20 MB agent conversations at once: /healthz keeps answering', { timeout: 90_000 }, async () => {
    const r = await rescueWhilePolled(...Array.from({ length: 4 }, (_, i) => agentConversationBody(20 * 1024 * 1024, 2_000, i)));
    console.log(
      `four 20 MB conversations: worst /healthz ${r.polled.worstMs} ms over ${r.polled.polls} polls, rescue ${r.wallMs} ms (${r.header.strategy}, ${r.summarizerCalls} summarizer calls)`,
    );
    expect(r.polled.failures).toBe(0);
    expect(r.polled.worstMs).toBeLessThan(WORST_HEALTHZ_MS);
  });

  it(
    'a million tiny messages with a budget that would take them: not parsed, not rescued (too many items), /healthz keeps answering',
    { timeout: 90_000 },
    async () => {
      // A budget that would not shed it: the item count, scanned before the parse, stops the rescue.
      const { answers, polled } = await sendWhilePolled([tinyTurnsBody(1_000_000, 0)], 2_048, {
        COMPACTION_RESCUE_BUDGET_BYTES: String(4 * 2 ** 30),
      });
      const a = answers[0];
      expect(a, gateway!.crashText()).not.toBeInstanceOf(Error);
      const answer = a as Exclude<typeof a, Error>;
      expect(answer.status).toBe(400);
      expect(parseCompactionHeader(answer.headers['x-gateway-compaction'] as string)).toMatchObject({
        outcome: 'not_shrunk',
        why: 'too_many_items',
      });
      console.log(`1M messages: worst /healthz ${polled.worstMs} ms over ${polled.polls} polls`);
      expect(polled.failures).toBe(0);
      expect(polled.worstMs).toBeLessThan(WORST_HEALTHZ_MS);
    },
  );
});
