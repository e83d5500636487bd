import { afterEach, describe, expect, it } from 'vitest';
import { agentConversationBody, manyStringsBody, tinyTurnsBody, wideObjectBody } from '../helpers/hostile-bodies.js';
import {
  boundedClient,
  pollHealth,
  sample,
  startHostileGateway,
  type HostileGateway,
  type PollResult,
  type Posted,
} from '../helpers/hostile-child.js';
import type { HostileStandIn } from '../helpers/hostile-standin.js';
import { kitMemory, type KitMemory } from '../helpers/kit-memory.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * Big and hostile rescues under the memory the kit ships: the built gateway in a child process
 * under the heap its manifest sets (`--max-old-space-size`), with its default rescue budget, its
 * peak RSS (VmHWM) held to the manifest's container limit with room to spare, and a /healthz
 * poller throughout. One body of 3 million keys (38 MB) or 8 million short strings (40 MB) once
 * killed the process with V8's heap out of memory, taking every tenant's streams with it: the
 * budget took them at 2 bytes a byte. Four 53 MB conversations at once took it past its limit.
 * Now every client gets an answer, rescued or the upstream's own error (shed, before the parse),
 * and the process stays up.
 */

const SIDECAR = kitMemory('sidecar');
const SHARED = kitMemory('shared');
/** Peak RSS stays under this share of the container's limit (four 53 MB bodies at once on the sidecar: 77-95% measured). */
const ROOM = 0.95;
/**
 * A hang, not a speed: /healthz answered within 26-85 ms (the event loop held at most 96 ms) on a
 * quiet 2-core machine, 650-1,730 ms at a load of 8-14 on it; the one JSON.parse these bodies once
 * got held every client 2.4-9.0 s. Speed is measured, not asserted (bench/findings.md).
 */
const WORST_HEALTHZ_MS = 2_000;
const CLIENT_WAIT_MS = 50_000;

let standIn: HostileStandIn | undefined;
let gateway: HostileGateway | undefined;
let client: ReturnType<typeof boundedClient> | undefined;
afterEach(async () => {
  await client?.close();
  await gateway?.stop();
  await standIn?.close();
  client = gateway = standIn = undefined;
});

/** Built once: a body of millions of keys or strings takes a second or two to write. */
let wide: Buffer | undefined;
let strings: Buffer | undefined;
const wideBody = () => (wide ??= wideObjectBody(3_000_000, 0));
const stringsBody = () => (strings ??= manyStringsBody(8_000_000, 0));

interface Run {
  answers: Array<Posted | string>;
  /** Peak RSS once listening, before any request. */
  idleMib: number;
  peakMib: number;
  polled: PollResult;
  wallMs: number;
  metrics: string;
}

/** Sends the bodies at once to a gateway under `kit`'s heap, /healthz polled throughout; checks it lived and holds nothing after. */
async function sendAtOnce(kit: KitMemory, bodies: Buffer[]): Promise<Run> {
  standIn = await startStandIn({ provider: 'hostile' });
  gateway = await startHostileGateway(standIn.baseUrl, kit.heapMb);
  client = boundedClient(CLIENT_WAIT_MS);
  const g = gateway;
  const idleMib = g.peakRssMb();
  const poller = pollHealth(g.origin, { everyMs: 15, maxPolls: 4_000 });
  const started = performance.now();
  const answers = await Promise.all(bodies.map((body) => send(g, body)));
  const wallMs = Math.round(performance.now() - started);
  const polled = await poller.stop();
  const peakMib = g.peakRssMb();
  expect(g.exit(), g.crashText()).toBeUndefined();
  const metrics = await client.text(`${g.origin}/metrics`);
  expect(metrics.status).toBe(200);
  // Nothing is left held once every rescue is over.
  expect(sample(metrics.text, 'gateway_rescue_budget_bytes', { state: 'in_use' })).toBe(0);
  expect(sample(metrics.text, 'gateway_rescue_budget_bytes', { state: 'limit' })).toBeGreaterThan(0);
  return { answers, idleMib, peakMib, polled, wallMs, metrics: metrics.text };
}

/** The answer to one request, or why there was none (with what the gateway printed if it died). */
async function send(g: HostileGateway, body: Buffer): Promise<Posted | string> {
  try {
    return await client!.post(`${g.origin}/v1/chat/completions`, body);
  } catch (err) {
    return `no answer (${(err as Error).message}); gateway ${g.exit() ? `exited ${JSON.stringify(g.exit())}:\n${g.crashText()}` : 'alive'}`;
  }
}

/**
 * What every client may get: the rescued answer, or the upstream's own refusal byte for byte,
 * marked shed. Returns the outcome.
 */
function expectAnswered(answer: Posted | string, body: Buffer, s: HostileStandIn): string {
  expect(typeof answer, String(answer)).toBe('object');
  const a = answer as Posted;
  const header = parseCompactionHeader(a.headers['x-gateway-compaction'] as string);
  if (a.status === 200) {
    expect(header.outcome).toBe('replayed');
    expect(JSON.parse(a.body.toString()).choices[0].message.content).toBe('rescued answer');
  } else {
    expect(a.status).toBe(400);
    expect(header.outcome).toBe('shed');
    // The refusal the stand-in sent for this very body (the first attempt goes as the client sent it).
    const refusal = s.chatCalls.find((c) => c.status === 400 && c.bytes === body.length);
    expect(refusal, 'the upstream refused a body of this size').toBeDefined();
    expect(a.body.equals(refusal!.answer), a.body.toString().slice(0, 300)).toBe(true);
  }
  return String(header.outcome);
}

/** Every client answered, the process within its container's limit and /healthz answering throughout; the outcomes. */
function expectHeld(kit: KitMemory, run: Run, bodies: Buffer[], what: string): string[] {
  const outcomes = run.answers.map((a, i) => expectAnswered(a, bodies[i], standIn!));
  const bodyMib = bodies.reduce((n, b) => n + b.length, 0) / 2 ** 20;
  console.log(
    `${what} under --max-old-space-size=${kit.heapMb} (limit ${kit.limitMib} MiB): peak RSS ${run.peakMib} MiB, ` +
      `${run.peakMib - run.idleMib} over idle (${((run.peakMib - run.idleMib) / bodyMib).toFixed(1)} a body byte), outcomes ${outcomes.join(',')}, worst /healthz ${run.polled.worstMs} ms ` +
      `over ${run.polled.polls} polls (the gateway's event loop held at most ${Math.round(1000 * (sample(run.metrics, 'nodejs_eventloop_lag_max_seconds', {}) ?? 0))} ms), ` +
      `${run.wallMs} ms, ${standIn!.summarizerCalls()} summarizer calls`,
  );
  expect(run.peakMib).toBeGreaterThan(0);
  expect(run.peakMib).toBeLessThan(kit.limitMib * ROOM);
  expect(run.polled.failures).toBe(0);
  expect(run.polled.worstMs).toBeLessThan(WORST_HEALTHZ_MS);
  const shed = outcomes.filter((o) => o === 'shed').length;
  expect(
    sample(run.metrics, 'gateway_compactions_total', { api: 'chat', strategy: 'none', outcome: 'shed', upstream: 'default' }) ?? 0,
  ).toBe(shed);
  // One attempt per client, and one replay per rescued one, compacted to what the upstream accepts.
  const replays = standIn!.chatCalls.filter((c) => c.status === 200);
  expect(standIn!.chatCalls).toHaveLength(bodies.length + replays.length);
  expect(replays).toHaveLength(bodies.length - shed);
  for (const r of replays) expect(Array.isArray(r.json?.messages)).toBe(true);
  return outcomes;
}

/** The hostile bodies are shed before they are parsed: no summarizer call, no replay. */
function expectAllShed(outcomes: string[]): void {
  expect(outcomes.every((o) => o === 'shed')).toBe(true);
  expect(standIn!.summarizerCalls()).toBe(0);
}

const agents = (mib: number, n: number) => Array.from({ length: n }, (_, i) => agentConversationBody(mib * 2 ** 20, 2_000, i));

describe(`the sidecar: --max-old-space-size=${SIDECAR.heapMb}, ${SIDECAR.limitMib} MiB`, () => {
  it('one body of 3 million keys in `metadata` (38 MB): shed before it is parsed, the process up', { timeout: 60_000 }, async () => {
    const bodies = [wideBody()];
    expectAllShed(expectHeld(SIDECAR, await sendAtOnce(SIDECAR, bodies), bodies, 'one 3M-key body'));
  });

  it('one message of 8 million short strings (40 MB): shed before it is parsed, the process up', { timeout: 60_000 }, async () => {
    const bodies = [stringsBody()];
    expectAllShed(expectHeld(SIDECAR, await sendAtOnce(SIDECAR, bodies), bodies, 'one 8M-string body'));
  });

  it('two of each at once', { timeout: 60_000 }, async () => {
    const bodies = [wideBody(), stringsBody(), wideBody(), stringsBody()];
    expectAllShed(expectHeld(SIDECAR, await sendAtOnce(SIDECAR, bodies), bodies, 'two 3M-key and two 8M-string bodies'));
  });

  it('four 20 MB agent conversations at once: every client answered, most rescued', { timeout: 60_000 }, async () => {
    const bodies = agents(20, 4);
    const outcomes = expectHeld(SIDECAR, await sendAtOnce(SIDECAR, bodies), bodies, 'four 20 MB conversations');
    // The budget takes two at once and two waiting.
    expect(outcomes.filter((o) => o === 'replayed').length).toBeGreaterThanOrEqual(2);
  });

  it('four 53 MB agent conversations at once: every client answered, the process within its limit', { timeout: 60_000 }, async () => {
    const bodies = agents(53, 4);
    const outcomes = expectHeld(SIDECAR, await sendAtOnce(SIDECAR, bodies), bodies, 'four 53 MB conversations');
    expect(outcomes).toContain('replayed');
  });

  it('one body of a million tiny messages (44 MB): shed before it is parsed', { timeout: 60_000 }, async () => {
    const bodies = [tinyTurnsBody(1_000_000, 0)];
    expectAllShed(expectHeld(SIDECAR, await sendAtOnce(SIDECAR, bodies), bodies, 'a million tiny messages'));
  });
});

describe(`the shared gateway: --max-old-space-size=${SHARED.heapMb}, ${SHARED.limitMib} MiB`, () => {
  it('three of each hostile body at once: all shed, the process up', { timeout: 60_000 }, async () => {
    const bodies = [wideBody(), stringsBody(), wideBody(), stringsBody(), wideBody(), stringsBody()];
    expectAllShed(expectHeld(SHARED, await sendAtOnce(SHARED, bodies), bodies, 'three 3M-key and three 8M-string bodies'));
  });

  it('six 53 MB agent conversations at once: every client answered, the process within its limit', { timeout: 60_000 }, async () => {
    const bodies = agents(53, 6);
    const outcomes = expectHeld(SHARED, await sendAtOnce(SHARED, bodies), bodies, 'six 53 MB conversations');
    expect(outcomes.filter((o) => o === 'replayed').length).toBeGreaterThanOrEqual(2);
  });
});
