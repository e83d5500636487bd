import { afterEach, expect, it } from 'vitest';
import { json, sse, startFakeUpstream, streamEvents, type FakeUpstream, type Handler, type Received } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest } from '../helpers/rescue.js';
import { Client, expectNothingLeftOpen, provider, settledResources, sleep, tracked, type TrackedHandler } from './helpers.js';

/*
 * The client goes away at each stage of a request. Each time the upstream (or summarizer)
 * request in flight is aborted, nothing further is sent upstream, nothing is left open, and the
 * next request works.
 */

let upstream: FakeUpstream | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
  gateway = upstream = undefined;
});

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const SLOW_EVENTS = streamEvents(Array.from({ length: 50 }, (_, i) => `tok${i} `));

/** A handler that signals its arrival, then holds its request open until the gateway aborts it. */
function hanging(): { handler: Handler; arrived: Promise<Received> } {
  let arrive!: (req: Received) => void;
  const arrived = new Promise<Received>((r) => (arrive = r));
  return {
    arrived,
    handler: async (req) => {
      arrive(req);
      await req.aborted;
    },
  };
}

/** Streams slowly, signalling when the first event went out. */
function slowStream(): { handler: Handler; arrived: Promise<Received> } {
  let arrive!: (req: Received) => void;
  const arrived = new Promise<Received>((r) => (arrive = r));
  return {
    arrived,
    handler: async (req, res) => {
      arrive(req);
      await sse(res, SLOW_EVENTS, 50);
    },
  };
}

interface Stage {
  name: string;
  setup: () => { side: TrackedHandler; arrived: Promise<Received> };
  body: object;
  /** Read the first bytes of the answer before aborting (the status is already out). */
  midStream?: boolean;
  calls: { chat: number; summarizer: number };
  /** Merged into the gateway's compaction config. */
  compaction?: Record<string, unknown>;
}

const stages: Stage[] = [
  {
    name: 'while the gateway waits for the upstream headers',
    setup: () => {
      const h = hanging();
      return { side: tracked(h.handler), arrived: h.arrived };
    },
    body: chat,
    calls: { chat: 1, summarizer: 0 },
  },
  {
    name: 'while the gateway holds a slow error body',
    setup: () => {
      let arrive!: (req: Received) => void;
      const arrived = new Promise<Received>((r) => (arrive = r));
      const side = tracked(async (req, res) => {
        res.writeHead(400, { 'content-type': 'application/json', 'content-length': '500' });
        res.write('{"error":{"message":"This model');
        arrive(req);
        await req.aborted;
      });
      return { side, arrived };
    },
    body: chat,
    calls: { chat: 1, summarizer: 0 },
  },
  {
    name: 'mid-stream',
    setup: () => {
      const h = slowStream();
      return { side: tracked(h.handler), arrived: h.arrived };
    },
    body: { ...chat, stream: true },
    midStream: true,
    calls: { chat: 1, summarizer: 0 },
  },
  {
    name: 'during the summarizer call',
    setup: () => {
      const h = hanging();
      return { side: provider({ summarizer: h.handler }), arrived: h.arrived };
    },
    body: agentRequest(60),
    calls: { chat: 1, summarizer: 1 },
    // Masking off: the compaction waits on the summarizer.
    compaction: { mask: false },
  },
  {
    name: 'during the replay, before its headers',
    setup: () => {
      const h = hanging();
      return { side: provider({ fits: h.handler }), arrived: h.arrived };
    },
    body: agentRequest(60),
    calls: { chat: 2, summarizer: 1 },
  },
  {
    name: 'during the replayed stream',
    setup: () => {
      const h = slowStream();
      return { side: provider({ fits: h.handler }), arrived: h.arrived };
    },
    body: { ...agentRequest(60), stream: true },
    midStream: true,
    calls: { chat: 2, summarizer: 1 },
  },
];

it.each(stages.map((s) => [s.name, s] as const))('the client disconnects %s', async (_name, stage) => {
  const { side, arrived } = stage.setup();
  let normal = false;
  upstream = await startFakeUpstream(async (req, res, raw) => {
    if (normal) return json(res, 200, { choices: [{ message: { role: 'assistant', content: 'ok' } }] });
    return side.handler(req, res, raw);
  });
  // A summarizer model of its own: the upstream's window does not size its calls, so the whole
  // middle goes in one (maxInputTokens).
  gateway = await startGateway({
    upstream: { url: upstream.baseUrl },
    summarizer: { maxInputTokens: 500_000, model: 'summarizer-model' },
    compaction: stage.compaction ?? {},
  });
  const baseline = await settledResources();
  const client = new Client();
  const abort = new AbortController();

  const pending = client.open(`${gateway.baseUrl}/chat/completions`, stage.body, abort.signal);
  const target = await arrived;
  if (stage.midStream) {
    const res = await pending;
    expect(res.statusCode).toBe(200);
    const first = await res.body[Symbol.asyncIterator]().next();
    expect(String(first.value)).toContain('data:');
  }
  abort.abort();
  await pending.then((res) => res.body.text()).catch(() => undefined);

  // The request the gateway had in flight is closed from the gateway's side.
  await target.aborted;
  // Time for a wrongly sent summarizer call or replay to arrive before counting.
  await sleep(150);
  const summarizer = upstream.received.filter((r) => r.headers['x-gateway-compaction'] === 'summarizer').length;
  expect({ chat: upstream.received.length - summarizer, summarizer }).toEqual(stage.calls);

  await expectNothingLeftOpen(baseline, side.unfinished, client);
  normal = true;
  const next = new Client();
  expect((await next.post(`${gateway.baseUrl}/chat/completions`, chat)).status).toBe(200);
  await next.close();
  const logged = gateway.logLines();
  expect(logged.filter((l) => l.level >= 50)).toEqual([]);
  expect(logged.some((l) => /client disconnected/.test(l.msg))).toBe(true);
});
