import { Agent } from 'undici';
import { Samples } from './stats.js';
import { SENT_AT_FIELD } from './upstream-config.js';

export interface StreamOptions {
  url: string;
  body: string;
  headers: Record<string, string>;
  concurrency: number;
  seconds: number;
  /** SSE events the upstream writes per stream, `gapMs` apart. */
  events: number;
  gapMs: number;
}

export interface StreamResult {
  streams: number;
  /** Request sent -> first body byte at the client. */
  ttfbP50Ms: number;
  ttfbP99Ms: number;
  totalP50Ms: number;
  /** Upstream's write -> arrival at the client, per event. */
  chunkDelayP50Ms: number;
  chunkDelayP99Ms: number;
  /** Streams in which some upstream writes reached the client merged into one read. */
  coalescedStreams: number;
  /** Client reads per upstream event, over all streams (1 when nothing is coalesced). */
  readsPerEvent: number;
  failures: number;
}

const MAX_STREAMS_PER_WORKER = 10_000;
const SENT_AT = new RegExp(`"${SENT_AT_FIELD}":([0-9.]+)`, 'g');

/**
 * `concurrency` clients each open one stream after another for `seconds`, counting the reads
 * the client gets against the events the upstream wrote: each write should arrive on its own.
 * Their starts are spread over a stream's length and kept apart by a random pause, as agents'
 * requests are: clients started together stay in lockstep (every stream lasts as long), and
 * each time to first byte would then include waiting behind the other 15 starts.
 */
export async function runStreams(options: StreamOptions): Promise<StreamResult> {
  const { origin, pathname } = new URL(options.url);
  const agent = new Agent({ keepAliveTimeout: 30_000, connections: options.concurrency });
  const m = { ttfb: new Samples(), total: new Samples(), delay: new Samples(), streams: 0, coalesced: 0, reads: 0, events: 0, failures: 0 };
  const deadline = performance.now() + options.seconds * 1000;
  const streamMs = options.events * options.gapMs;
  const worker = async () => {
    await sleep(Math.random() * streamMs);
    for (let i = 0; i < MAX_STREAMS_PER_WORKER && performance.now() < deadline; i++) {
      if (i > 0) await sleep(Math.random() * options.gapMs * 2);
      try {
        await oneStream(agent, origin, pathname, options, m);
      } catch {
        m.failures++;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency }, worker));
  } finally {
    await agent.close();
  }
  return {
    streams: m.streams,
    ttfbP50Ms: m.ttfb.percentile(50),
    ttfbP99Ms: m.ttfb.percentile(99),
    totalP50Ms: m.total.percentile(50),
    chunkDelayP50Ms: m.delay.percentile(50),
    chunkDelayP99Ms: m.delay.percentile(99),
    coalescedStreams: m.coalesced,
    readsPerEvent: m.events > 0 ? m.reads / m.events : Number.NaN,
    failures: m.failures,
  };
}

type Tally = {
  ttfb: Samples;
  total: Samples;
  delay: Samples;
  streams: number;
  coalesced: number;
  reads: number;
  events: number;
  failures: number;
};

async function oneStream(agent: Agent, origin: string, path: string, options: StreamOptions, m: Tally): Promise<void> {
  const started = performance.now();
  const res = await agent.request({ origin, path, method: 'POST', headers: options.headers, body: options.body });
  let reads = 0;
  let text = '';
  // 'data' events, not async iteration: an iterator's read() would merge chunks buffered meanwhile.
  await new Promise<void>((resolve, reject) => {
    res.body.on('data', (chunk: Buffer) => {
      const now = performance.now();
      if (reads++ === 0) m.ttfb.push(now - started);
      const piece = chunk.toString('latin1');
      for (const match of piece.matchAll(SENT_AT)) m.delay.push(performance.timeOrigin + now - Number(match[1]));
      text += piece;
    });
    res.body.on('end', resolve).on('error', reject);
  });
  m.total.push(performance.now() - started);
  const events = text.split('\n\n').length - 1;
  if (res.statusCode !== 200 || events !== options.events) {
    m.failures++;
    return;
  }
  m.streams++;
  m.reads += reads;
  m.events += events;
  if (reads < events) m.coalesced++;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
