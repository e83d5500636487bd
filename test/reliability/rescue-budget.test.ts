import OpenAI from 'openai';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type Received } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentConversationBody } from '../helpers/hostile-bodies.js';
import { sample } from '../helpers/hostile-child.js';
import { contextLengthError } from '../helpers/hostile-standin.js';
import { isSummarizer, parseCompactionHeader } from '../helpers/rescue.js';
import { sleep } from './helpers.js';

/*
 * The gateway-wide budget for memory under rescue (compaction.rescueBudgetBytes): a rescue that
 * does not fit waits its turn (compaction.rescueWaitMs), then is shed: the client gets the
 * upstream's own error byte for byte, marked `outcome=shed`, with a WARN line and a count. A body
 * that could never fit is shed at once, and so is one whose body does not fit even to wait (a
 * waiting body counts); a waiting client that leaves gives its place up.
 */

const LIMIT_BYTES = 60_000;
/** Two conversations of one size (seeds of one digit: the same bytes, the same objects) and a smaller one. */
const A = agentConversationBody(300_000, 40, 1);
const B = agentConversationBody(300_000, 40, 2);
const SMALL = agentConversationBody(75_000, 40, 3);
/** Which conversation a request (a client's or a summarizer call) is about: each tool output names its module. */
const about = (r: Received, seed: number) => r.body.includes(`src/module-${seed}.ts`);

/**
 * The upstream: refuses a body over LIMIT_BYTES (recording the exact error bytes it sent),
 * answers a smaller one, and plays the summarizer, holding the calls about a conversation until
 * the test opens its gate.
 */
async function startUpstream() {
  const refusals = new Map<Received, Buffer>();
  const gates = new Map<number, { open: () => void; opened: Promise<void> }>();
  const upstream = await startFakeUpstream(async (req, res) => {
    if (isSummarizer(req)) {
      for (const [seed, gate] of gates) if (about(req, seed)) await gate.opened;
      return json(res, 200, completion(`SUMMARY: the agent ran the tests of a project.`, 'chatcmpl-summary'));
    }
    if (req.body.length > LIMIT_BYTES) {
      const answer = contextLengthError(req.body.length, LIMIT_BYTES);
      refusals.set(req, answer);
      return json(res, 400, answer.toString());
    }
    return json(res, 200, completion('rescued answer'));
  });
  return {
    upstream,
    /** Holds the summarizer calls about conversation `seed` until `open()`. */
    gate(seed: number) {
      let open!: () => void;
      const opened = new Promise<void>((r) => (open = r));
      gates.set(seed, { open, opened });
      return open;
    },
    refusalOf(seed: number): Buffer | undefined {
      for (const [req, answer] of refusals) if (about(req, seed)) return answer;
      return undefined;
    },
    /** Lets every held summarizer call go (a failed test must not leave the gateway waiting on one). */
    openAll: () => gates.forEach((g) => g.open()),
    chats: (seed: number) => upstream.received.filter((r) => !isSummarizer(r) && about(r, seed)),
    summarizerCalls: (seed: number) => upstream.received.filter((r) => isSummarizer(r) && about(r, seed)),
  };
}

type Upstream = Awaited<ReturnType<typeof startUpstream>>;

interface Answer {
  status: number;
  header: Record<string, string | number>;
  bytes: Buffer;
}

/**
 * One chat request through the official SDK; what reached it on the wire is read by a fetch
 * that passes the response on untouched. An error answer is the SDK's APIError, and its bytes.
 */
async function viaSdk(gateway: TestGateway, body: Buffer, signal?: AbortSignal): Promise<Answer> {
  let wire: Promise<Answer> | undefined;
  const sdk = new OpenAI({
    baseURL: gateway.baseUrl,
    apiKey: 'sk-test',
    maxRetries: 0,
    timeout: 60_000,
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      const copy = res.clone();
      wire = copy.arrayBuffer().then((b) => ({
        status: copy.status,
        header: parseCompactionHeader(copy.headers.get('x-gateway-compaction')),
        bytes: Buffer.from(b),
      }));
      return res;
    },
  });
  try {
    const done = await sdk.chat.completions.create(JSON.parse(body.toString()), { signal });
    expect(done.choices[0].message.content).toBe('rescued answer');
  } catch (err) {
    if (!(err instanceof OpenAI.APIError) || err instanceof OpenAI.APIUserAbortError) throw err;
  }
  return wire!;
}

let up: Upstream | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  up?.openAll();
  await gateway?.close();
  await up?.upstream.close();
  gateway = up = undefined;
});

async function start(compaction: { rescueBudgetBytes?: number; rescueWaitMs?: number }) {
  up = await startUpstream();
  gateway = await startGateway({ upstream: { url: up.upstream.baseUrl }, compaction: { mask: false, ...compaction } });
  return { up, gateway };
}

const metrics = async (g: TestGateway) => (await fetch(`${g.origin}/metrics`)).text();
const inUse = async (g: TestGateway) => sample(await metrics(g), 'gateway_rescue_budget_bytes', { state: 'in_use' });
const shedCount = async (g: TestGateway) =>
  sample(await metrics(g), 'gateway_compactions_total', { api: 'chat', strategy: 'none', outcome: 'shed', upstream: 'default' });
// A shed rescue's client gets the upstream's error: its one line is an ERROR.
const shedWarnings = (g: TestGateway) => g.logLines().filter((l) => l.level === 50 && /\bshed\b/.test(l.msg));

/** Waits (bounded) until `ready()` holds; fails saying what was awaited. */
async function until(what: string, ready: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** `promise`, or a failure naming what did not happen within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The budget in use comes down to `bytes` once the rescues holding the rest are over. */
async function untilGivenBack(g: TestGateway, bytes: number): Promise<void> {
  await until(`the budget in use to come down to ${bytes}`, async () => (await inUse(g)) === bytes, 5_000);
}

/** The client got the upstream's own refusal of its body, byte for byte, marked shed. */
function expectShed(answer: Answer, refusal: Buffer | undefined): void {
  expect(answer.status).toBe(400);
  expect(answer.header.outcome).toBe('shed');
  expect(refusal, 'the upstream refused the body').toBeDefined();
  expect(answer.bytes.equals(refusal!), answer.bytes.toString()).toBe(true);
}

function expectReplayed(answer: Answer): void {
  expect(answer.status, answer.bytes.toString().slice(0, 300)).toBe(200);
  expect(answer.header.outcome).toBe('replayed');
}

/**
 * What a rescue of each body holds, as the budget counts it: read off the gauge of a gateway with
 * the default budget while the body's summarizer call is held.
 */
const cost: Record<'big' | 'small', number> = { big: 0, small: 0 };
beforeAll(async () => {
  const probe = await start({});
  for (const [name, body, seed] of [
    ['big', A, 1],
    ['small', SMALL, 3],
  ] as const) {
    const open = probe.up.gate(seed);
    const answer = viaSdk(probe.gateway, body);
    await until(`the summarizer call about conversation ${seed}`, () => probe.up.summarizerCalls(seed).length > 0);
    cost[name] = (await inUse(probe.gateway)) ?? 0;
    open();
    expectReplayed(await answer);
  }
  await gateway!.close();
  await up!.upstream.close();
  gateway = up = undefined;
  expect(B.length).toBe(A.length);
  expect(cost.big).toBeGreaterThan(A.length);
  expect(cost.small).toBeGreaterThan(0);
  console.log(`rescue cost as budgeted: ${A.length} B body -> ${cost.big} B, ${SMALL.length} B body -> ${cost.small} B`);
});

describe('the rescue budget', () => {
  it('a body that costs more than the whole budget is shed at once: the upstream error, the header, the WARN line, the count', async () => {
    // A wait long enough that a shed "at once" cannot be a shed after waiting.
    const { up, gateway } = await start({ rescueBudgetBytes: Math.floor(cost.big / 2), rescueWaitMs: 60_000 });
    const started = performance.now();
    const answer = await viaSdk(gateway, A);
    expect(performance.now() - started).toBeLessThan(60_000);
    expectShed(answer, up.refusalOf(1));
    expect(up.chats(1)).toHaveLength(1);
    expect(up.summarizerCalls(1)).toHaveLength(0);
    expect(await shedCount(gateway)).toBe(1);
    expect(await inUse(gateway)).toBe(0);
    const warned = shedWarnings(gateway);
    expect(warned).toHaveLength(1);
    expect(warned[0].msg).toMatch(/passing the upstream error through/);
    expect(warned[0].compaction).toMatchObject({ outcome: 'shed' });
  });

  it('two rescues that together pass the budget: the second waits for the first, then is rescued too', async () => {
    const { up, gateway } = await start({ rescueBudgetBytes: Math.floor(cost.big * 1.5), rescueWaitMs: 30_000 });
    const openA = up.gate(1);
    const first = viaSdk(gateway, A);
    await until('the first rescue to reach its summarizer', () => up.summarizerCalls(1).length > 0);
    expect(await inUse(gateway)).toBe(cost.big);
    let secondDone = false;
    const second = viaSdk(gateway, B).finally(() => (secondDone = true));
    await until('the upstream to refuse the second', () => up.chats(2).length > 0);
    // Refused and waiting: no work on it while the first holds the budget, and its body counts.
    await sleep(500);
    expect(up.summarizerCalls(2)).toHaveLength(0);
    expect(secondDone).toBe(false);
    expect(await inUse(gateway)).toBe(cost.big + B.length);

    openA();
    expectReplayed(await first);
    expectReplayed(await second);
    // The second's compaction began only once the first was over (its replay answered).
    const order = up.upstream.received;
    const replayOfA = order.indexOf(up.chats(1)[1]);
    expect(replayOfA).toBeGreaterThan(0);
    expect(order.indexOf(up.summarizerCalls(2)[0])).toBeGreaterThan(replayOfA);
    expect(up.chats(2)).toHaveLength(2);
    await untilGivenBack(gateway, 0);
    expect(await shedCount(gateway)).toBe(0);
    expect(shedWarnings(gateway)).toHaveLength(0);
  });

  it('a rescue whose body does not fit beside those held is shed at once, without waiting', async () => {
    const { up, gateway } = await start({ rescueBudgetBytes: cost.big + Math.floor(B.length / 2), rescueWaitMs: 60_000 });
    const openA = up.gate(1);
    const first = viaSdk(gateway, A);
    await until('the first rescue to reach its summarizer', () => up.summarizerCalls(1).length > 0);
    const second = await within(viaSdk(gateway, B), 30_000, 'the second to be shed without waiting rescueWaitMs');
    expectShed(second, up.refusalOf(2));
    expect(up.summarizerCalls(2)).toHaveLength(0);
    expect(await shedCount(gateway)).toBe(1);
    expect(await inUse(gateway)).toBe(cost.big);
    openA();
    expectReplayed(await first);
    await untilGivenBack(gateway, 0);
  });

  it('the second is shed after rescueWaitMs when the first takes longer', async () => {
    const WAIT_MS = 300;
    const { up, gateway } = await start({ rescueBudgetBytes: Math.floor(cost.big * 1.5), rescueWaitMs: WAIT_MS });
    const openA = up.gate(1);
    const first = viaSdk(gateway, A);
    await until('the first rescue to reach its summarizer', () => up.summarizerCalls(1).length > 0);
    const started = performance.now();
    const second = await viaSdk(gateway, B);
    // It waited its turn before giving up (the wait starts after the upstream's refusal).
    expect(performance.now() - started).toBeGreaterThanOrEqual(WAIT_MS);
    expectShed(second, up.refusalOf(2));
    expect(up.chats(2)).toHaveLength(1);
    expect(up.summarizerCalls(2)).toHaveLength(0);
    const warned = shedWarnings(gateway);
    expect(warned).toHaveLength(1);
    expect(warned[0].compaction).toMatchObject({ outcome: 'shed' });
    expect(await shedCount(gateway)).toBe(1);
    // The first was never disturbed.
    openA();
    expectReplayed(await first);
    await untilGivenBack(gateway, 0);
  });

  it('a client that leaves while waiting gives its place up: the one behind it goes ahead', async () => {
    const budget = Math.floor(cost.big * 1.5);
    expect(cost.big + cost.small).toBeLessThanOrEqual(budget);
    const { up, gateway } = await start({ rescueBudgetBytes: budget, rescueWaitMs: 30_000 });
    const openA = up.gate(1);
    let firstDone = false;
    const first = viaSdk(gateway, A).finally(() => (firstDone = true));
    await until('the first rescue to reach its summarizer', () => up.summarizerCalls(1).length > 0);
    const leaving = new AbortController();
    const second = viaSdk(gateway, B, leaving.signal).then(
      () => 'answered',
      (err) => (err instanceof OpenAI.APIUserAbortError ? 'aborted' : `failed: ${err}`),
    );
    await until('the upstream to refuse the second', () => up.chats(2).length > 0);
    await sleep(500);
    // The small one would fit beside the first, but waits behind the second, in the order asked.
    const small = viaSdk(gateway, SMALL);
    await until('the upstream to refuse the small one', () => up.chats(3).length > 0);
    await sleep(500);
    expect(up.summarizerCalls(3)).toHaveLength(0);

    leaving.abort();
    expect(await second).toBe('aborted');
    expectReplayed(await within(small, 10_000, 'the small one to be rescued while the first still holds its share'));
    // Rescued while the first still holds its share.
    expect(firstDone).toBe(false);
    await untilGivenBack(gateway, cost.big);
    openA();
    expectReplayed(await first);
    expect(up.summarizerCalls(2)).toHaveLength(0);
    expect(up.chats(2)).toHaveLength(1);
    await untilGivenBack(gateway, 0);
    // Leaving is not being shed: no budget was short, and nothing was relayed to anyone.
    expect(shedWarnings(gateway)).toHaveLength(0);
    expect(await shedCount(gateway)).toBe(0);
  });
});
