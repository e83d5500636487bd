import { request } from 'undici';
import type { CompactResult } from './compact.js';
import { runOnce, startProcess, type BenchProcess } from './procs.js';
import { bigAgentRequest, CHAT_PATH, SDK_HEADERS } from './requests.js';
import { median } from './stats.js';
import { ACCEPT_ANY_SIZE, type UpstreamConfig } from './upstream-config.js';

export interface RescueOptions {
  /** Compactions timed in the compaction child (after `warmups` untimed ones). */
  compactRuns: number;
  /** Rescued requests sent end to end, per strategy. */
  requests: number;
  /** What one summarizer call takes at the fake summarizer. */
  summaryDelayMs: number;
  log: (line: string) => void;
}

export interface EndToEnd {
  strategy: 'summarize' | 'fallback';
  requests: number;
  totalMs: number;
  /** The summarizer's own time: the union of the intervals in which it was answering. */
  summarizerMs: number;
  summarizerCalls: number;
  /** totalMs - summarizerMs. */
  gatewayShareMs: number;
  gatewayCpuMs: number;
}

export interface RescueResult {
  compact: CompactResult;
  endToEnd: EndToEnd[];
  /** The same 7 MB request accepted on the first attempt, through the gateway: the transfer's own cost. */
  unrescuedMs: number;
  gatewayPeakRssBytes: number;
}

/** A 128k-token model at 4 bytes per token: the fake provider's context window. */
const LIMIT_BYTES = 512_000;

export async function measureRescue(options: RescueOptions): Promise<RescueResult> {
  options.log('rescue: compacting the 7 MB conversation in a fresh process');
  const compact = await runOnce<CompactResult>(
    'compaction',
    'compact.ts',
    { runs: options.compactRuns, warmups: 3 },
    ['--expose-gc'],
    120_000,
  );
  const upstreamConfig: UpstreamConfig = {
    answerBytes: 800,
    streamEvents: 10,
    streamGapMs: 1,
    limitBytes: LIMIT_BYTES,
    summaryDelayMs: options.summaryDelayMs,
  };
  const upstream = await startProcess('upstream', 'upstream.ts', upstreamConfig);
  const endToEnd: EndToEnd[] = [];
  let unrescuedMs = Number.NaN;
  let peakRss = 0;
  try {
    for (const strategy of ['summarize', 'fallback'] as const) {
      const gateway = await startProcess('gateway', 'gateway.ts', {
        upstream: { url: `${upstream.origin}/v1` },
        log: { level: 'info' },
        compaction: { strategy },
      });
      try {
        endToEnd.push(await rescueRequests(gateway, upstream, strategy, options));
        if (strategy === 'fallback') unrescuedMs = await unrescued(gateway, options.requests);
        peakRss = Math.max(peakRss, (await gateway.stats()).maxRssBytes);
      } finally {
        await gateway.stop();
      }
    }
  } finally {
    await upstream.stop();
  }
  return { compact, endToEnd, unrescuedMs, gatewayPeakRssBytes: peakRss };
}

async function rescueRequests(
  gateway: BenchProcess,
  upstream: BenchProcess,
  strategy: EndToEnd['strategy'],
  options: RescueOptions,
): Promise<EndToEnd> {
  // One untimed request first: the gateway's code paths are cold in a fresh process.
  await send(gateway, bigBody(100), {}, 'outcome=replayed');
  const runs: Array<{ total: number; summarizer: number; calls: number; cpu: number }> = [];
  for (let i = 0; i < options.requests; i++) {
    // A conversation of its own each time: the gateway's compaction memory must not recall it.
    const body = bigBody(7 + i);
    const [u0, g0] = [await upstream.stats(), await gateway.stats()];
    const total = await send(gateway, body, {}, 'outcome=replayed');
    const [u1, g1] = [await upstream.stats(), await gateway.stats()];
    runs.push({
      total,
      summarizer: u1.extra!.summarizerBusyMs - u0.extra!.summarizerBusyMs,
      calls: u1.extra!.summarizerCalls - u0.extra!.summarizerCalls,
      cpu: g1.cpuMs - g0.cpuMs,
    });
    options.log(`rescue: ${strategy} ${Math.round(total)} ms end to end, summarizer ${Math.round(runs.at(-1)!.summarizer)} ms`);
  }
  const totalMs = median(runs.map((r) => r.total));
  const summarizerMs = median(runs.map((r) => r.summarizer));
  return {
    strategy,
    requests: runs.length,
    totalMs,
    summarizerMs,
    summarizerCalls: median(runs.map((r) => r.calls)),
    gatewayShareMs: median(runs.map((r) => r.total - r.summarizer)),
    gatewayCpuMs: median(runs.map((r) => r.cpu)),
  };
}

async function unrescued(gateway: BenchProcess, requests: number): Promise<number> {
  const body = bigBody(7);
  const times: number[] = [];
  // Opted out: the same conversation is remembered, and would otherwise be sent compacted ahead.
  for (let i = 0; i < requests; i++)
    times.push(await send(gateway, body, { [ACCEPT_ANY_SIZE]: '1', 'x-gateway-compaction': 'off' }, undefined));
  return median(times);
}

function bigBody(seed: number): Buffer {
  return Buffer.from(JSON.stringify(bigAgentRequest(seed)));
}

/** Sends the 7 MB request and reads the whole answer; returns the milliseconds it took. */
async function send(gateway: BenchProcess, body: Buffer, extra: Record<string, string>, expectHeader: string | undefined): Promise<number> {
  const started = performance.now();
  const res = await request(`${gateway.origin}${CHAT_PATH}`, { method: 'POST', headers: { ...SDK_HEADERS, ...extra }, body });
  await res.body.arrayBuffer();
  const took = performance.now() - started;
  const header = String(res.headers['x-gateway-compaction'] ?? '');
  const recalled = header.includes('memory=hit');
  if (res.statusCode !== 200 || recalled || (expectHeader && !header.includes(expectHeader))) {
    throw new Error(`rescued request answered ${res.statusCode}, x-gateway-compaction: ${header || '(none)'}`);
  }
  return took;
}
