import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProcess, type BenchProcess } from '../../bench/procs.js';
import { CHAT_PATH, SDK_HEADERS, smallChatBody, streamChatBody } from '../../bench/requests.js';

/*
 * The rescue's floors (bench/hold-floor.ts) are only a measure if they answer what the floor
 * answers: the same status, bytes and framing, a small answer and a stream alike, with the
 * gateway's features on or off. Figures are never checked here (timings on CI mean nothing).
 */

const VARIANTS = [
  { name: 'hold', config: {} },
  { name: 'hold on fastify', config: { fastify: true } },
  { name: 'hold with the features', config: { features: true } },
  { name: 'hold on fastify with the features', config: { fastify: true, features: true } },
];

let upstream: BenchProcess;
const procs: BenchProcess[] = [];

beforeAll(async () => {
  upstream = await startProcess('upstream', 'upstream.ts', { answerBytes: 800, streamEvents: 5, streamGapMs: 1, summaryDelayMs: 0 });
});
afterAll(async () => {
  for (const p of procs) await p.stop();
  await upstream?.stop();
});

async function answer(origin: string, body: string) {
  const res = await fetch(`${origin}${CHAT_PATH}`, { method: 'POST', headers: SDK_HEADERS, body });
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    length: res.headers.get('content-length'),
    chunked: res.headers.get('transfer-encoding'),
    requestId: res.headers.get('x-request-id'),
    // The fake upstream stamps each stream event with when it sent it.
    body: (await res.text()).replace(/"x_sent_at":[\d.]+/g, '"x_sent_at":0'),
  };
}

describe.each(VARIANTS)('$name', ({ config }) => {
  it('answers as the floor does, small and streamed', async () => {
    const floor = await startProcess('floor', 'floor.ts', { upstream: upstream.origin });
    const hold = await startProcess('hold', 'hold-floor.ts', { upstream: upstream.origin, ...config });
    procs.push(floor, hold);
    for (const body of [smallChatBody(), streamChatBody()]) {
      const [expected, got] = [await answer(floor.origin, body), await answer(hold.origin, body)];
      expect(got.status).toBe(200);
      expect({ ...got, requestId: null }).toEqual({ ...expected, requestId: null });
      // With the features, the gateway's own request id; without, none.
      expect(got.requestId !== null).toBe('features' in config);
    }
  }, 30_000);
});
