import { afterEach, describe, expect, it } from 'vitest';
import { agentConversationBody, tinyTurnsBody } from '../helpers/hostile-bodies.js';
import { boundedClient, sample, startHostileGateway, type HostileGateway, type Posted } from '../helpers/hostile-child.js';
import { startHostileStandIn, type HostileStandIn } from '../helpers/hostile-standin.js';
import { parseCompactionHeader } from '../helpers/rescue.js';

/*
 * Big rescues under the heap limit of a small container: the built gateway in a child process
 * under `--max-old-space-size=384`, with its default rescue budget (a share of that heap). A
 * rescue once held about 7.5x its body: four 20 MB conversations at once, or one body of a million
 * tiny messages, ran V8 out of memory and the process died (SIGABRT), with every other client's
 * request. Now each client gets an answer, rescued or the upstream's own error (shed), and the
 * process stays up to answer /metrics afterwards.
 */

const HEAP_MB = 384;
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

async function start() {
  standIn = await startHostileStandIn();
  gateway = await startHostileGateway(standIn.baseUrl, HEAP_MB);
  client = boundedClient(CLIENT_WAIT_MS);
  return { standIn, gateway, client };
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

async function expectServingAfter(g: HostileGateway): Promise<string> {
  expect(g.exit(), g.crashText()).toBeUndefined();
  const metrics = await client!.text(`${g.origin}/metrics`);
  expect(metrics.status).toBe(200);
  // Nothing is left held once every rescue is over.
  expect(sample(metrics.text, 'gateway_rescue_budget_bytes', { state: 'in_use' })).toBe(0);
  expect(sample(metrics.text, 'gateway_rescue_budget_bytes', { state: 'limit' })).toBeGreaterThan(0);
  return metrics.text;
}

describe(`big rescues under a ${HEAP_MB} MB heap`, () => {
  it('four concurrent 20 MB agent conversations: the process stays up and every client gets an answer', { timeout: 90_000 }, async () => {
    const { standIn: s, gateway: g } = await start();
    const bodies = Array.from({ length: 4 }, (_, i) => agentConversationBody(20 * 1024 * 1024, 2_000, i));
    const started = performance.now();
    const answers = await Promise.all(bodies.map((b) => send(g, b)));
    const wallMs = Math.round(performance.now() - started);
    const peak = g.peakRssMb();
    const outcomes = answers.map((a, i) => expectAnswered(a, bodies[i], s));
    const metrics = await expectServingAfter(g);
    const counted = (outcome: string, strategy: string) => sample(metrics, 'gateway_compactions_total', { api: 'chat', strategy, outcome }) ?? 0;
    const shed = outcomes.filter((o) => o === 'shed').length;
    expect(counted('shed', 'none')).toBe(shed);
    // Every rescued one went upstream a second time, compacted to what the upstream accepts.
    const replays = s.chatCalls.filter((c) => c.status === 200);
    expect(replays).toHaveLength(4 - shed);
    for (const r of replays) expect(Array.isArray(r.json?.messages)).toBe(true);
    console.log(
      `four 20 MB rescues under --max-old-space-size=${HEAP_MB}: peak RSS ${peak} MB, outcomes ${outcomes.join(',')}, ${wallMs} ms, ` +
        `${s.summarizerCalls()} summarizer calls, body ${(bodies[0].length / 2 ** 20).toFixed(1)} MiB`,
    );
  });

  it('one body of a million tiny messages (~44 MB): the process stays up and the client gets an answer', { timeout: 90_000 }, async () => {
    const { standIn: s, gateway: g } = await start();
    const body = tinyTurnsBody(1_000_000, 0);
    const started = performance.now();
    const answer = await send(g, body);
    const wallMs = Math.round(performance.now() - started);
    const peak = g.peakRssMb();
    const outcome = expectAnswered(answer, body, s);
    await expectServingAfter(g);
    console.log(`1M tiny messages (${(body.length / 2 ** 20).toFixed(1)} MiB) under --max-old-space-size=${HEAP_MB}: peak RSS ${peak} MB, outcome ${outcome}, ${wallMs} ms`);
  });
});
