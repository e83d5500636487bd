import { request } from 'undici';
import { startDistGateway } from './dist-gateway.js';
import { runLoad, type LoadResult } from './load.js';
import { startProcess, type BenchProcess } from './procs.js';
import { agentChatBody, CHAT_PATH, SDK_HEADERS, smallChatBody } from './requests.js';
import { median } from './stats.js';
import { ACCEPT_ANY_SIZE, type UpstreamConfig } from './upstream-config.js';

/*
 * Rescues under load: small requests at a fixed rate, and in alternate phases agents'
 * conversations overflowing at a steady rate beside them (each a conversation of its own,
 * refused, summarised with masking off, replayed). The gateway runs as `npm start` runs it. What it reports:
 * the small requests' p99 with and without rescues going on, a rescued request's time against
 * the summarizer's own time and against the same request accepted at once, and the gateway's CPU
 * per rescue (its CPU in a rescuing phase less what the phase's small requests cost at the
 * quiet phases' rate per request).
 */

export interface RescueLoadOptions {
  rounds: number;
  seconds: number;
  /** Small requests a second (open loop), over 16 connections. */
  smallRate: number;
  /** A new overflowing conversation is sent this often (one at a time, the next when this one is answered or the interval is up). */
  everyMs: number;
  summaryDelayMs: number;
  /** Called as each phase starts (bench/rescue-profile.ts marks its profile's time with it). */
  phase?: (name: 'quiet' | 'rescuing') => void;
  /** Node flags for the gateway process (bench/rescue-profile.ts: --cpu-prof). */
  gatewayFlags?: string[];
  log: (line: string) => void;
}

export interface RescueLoadResult {
  smallP99QuietMs: number;
  smallP99RescuingMs: number;
  smallP50QuietMs: number;
  smallP50RescuingMs: number;
  rescues: number;
  rescueBytes: number;
  rescuedTotalMs: number;
  summarizerMs: number;
  /** The same conversations sent to a window large enough: no rescue, for reference. */
  acceptedMs: number;
  gatewayCpuPerRescueMs: number;
  failures: number;
}

/** A 128k-token window at 4 bytes a token, as the rescue section's provider has. */
const LIMIT_BYTES = 512_000;
const RESCUE_BYTES = 700_000;

export async function measureRescueLoad(options: RescueLoadOptions): Promise<RescueLoadResult> {
  const upstreamConfig: UpstreamConfig = {
    answerBytes: 800,
    streamEvents: 10,
    streamGapMs: 1,
    limitBytes: LIMIT_BYTES,
    summaryDelayMs: options.summaryDelayMs,
  };
  const upstream = await startProcess('upstream', 'upstream.ts', upstreamConfig);
  let gateway: BenchProcess | undefined;
  try {
    // Masking off: a rescue that masking alone could make fit would not call the summarizer, whose time is what a rescue is set against.
    gateway = await startDistGateway('gateway', { UPSTREAM_URL: `${upstream.origin}/v1`, COMPACTION_MASK: 'false' }, options.gatewayFlags);
    const url = `${gateway.origin}${CHAT_PATH}`;
    const small = () =>
      runLoad({ url, body: smallChatBody(), headers: SDK_HEADERS, connections: 16, seconds: options.seconds, rate: options.smallRate });
    let seed = 100;
    // Warm: one rescue and a second of small requests, untimed.
    await rescueOnce(url, agentChatBody(RESCUE_BYTES, seed++));
    await runLoad({ url, body: smallChatBody(), headers: SDK_HEADERS, connections: 16, seconds: 1, rate: options.smallRate });
    const quiet: Array<{ load: LoadResult; cpuMs: number }> = [];
    const busy: Array<{ load: LoadResult; cpuMs: number; rescued: Array<{ ms: number; summarizerMs: number }> }> = [];
    const accepted: number[] = [];
    for (let round = 0; round < options.rounds; round++) {
      // Built before the timed phases: building one takes this process's event loop, which times
      // the small requests, for 180-320 ms (bench/findings.md, round 11).
      const conversations = Array.from({ length: Math.ceil((options.seconds * 1000) / options.everyMs) }, () =>
        agentChatBody(RESCUE_BYTES, seed++),
      );
      const acceptedBody = agentChatBody(RESCUE_BYTES, seed++);
      options.phase?.('quiet');
      const c0 = (await gateway.stats()).cpuMs;
      quiet.push({ load: await small(), cpuMs: (await gateway.stats()).cpuMs - c0 });
      options.phase?.('rescuing');
      const c1 = (await gateway.stats()).cpuMs;
      const until = performance.now() + options.seconds * 1000;
      const rescuing = (async () => {
        const rescued: Array<{ ms: number; summarizerMs: number }> = [];
        // Bounded by the phase's time and by the conversations built for it.
        for (let i = 0; i < conversations.length && performance.now() < until - 200; i++) {
          const started = performance.now();
          const u0 = (await upstream.stats()).extra!.summarizerBusyMs;
          const ms = await rescueOnce(url, conversations[i]);
          rescued.push({ ms, summarizerMs: (await upstream.stats()).extra!.summarizerBusyMs - u0 });
          const wait = options.everyMs - (performance.now() - started);
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
        return rescued;
      })();
      const [load, rescued] = await Promise.all([small(), rescuing]);
      busy.push({ load, cpuMs: (await gateway.stats()).cpuMs - c1, rescued });
      // The same size accepted at once: what a rescue adds to the transfer's own time.
      accepted.push(await acceptedOnce(url, acceptedBody));
      options.log(
        `rescue under load round ${round + 1}/${options.rounds}: small p99 ${load.p99Ms.toFixed(2)} ms with ${rescued.length} rescues, ${quiet.at(-1)!.load.p99Ms.toFixed(2)} ms without`,
      );
    }
    const rescues = busy.flatMap((b) => b.rescued);
    const perSmall = median(quiet.map((q) => q.cpuMs / q.load.responses));
    const perRescue = busy.map((b) => (b.cpuMs - perSmall * b.load.responses) / Math.max(1, b.rescued.length));
    return {
      smallP99QuietMs: median(quiet.map((q) => q.load.p99Ms)),
      smallP99RescuingMs: median(busy.map((b) => b.load.p99Ms)),
      smallP50QuietMs: median(quiet.map((q) => q.load.p50Ms)),
      smallP50RescuingMs: median(busy.map((b) => b.load.p50Ms)),
      rescues: rescues.length,
      rescueBytes: Buffer.byteLength(agentChatBody(RESCUE_BYTES, 100)),
      rescuedTotalMs: median(rescues.map((r) => r.ms)),
      summarizerMs: median(rescues.map((r) => r.summarizerMs)),
      acceptedMs: median(accepted),
      gatewayCpuPerRescueMs: median(perRescue),
      failures: [...quiet, ...busy].reduce((n, r) => n + r.load.failures, 0),
    };
  } finally {
    await gateway?.stop();
    await upstream.stop();
  }
}

/** Sends one overflowing conversation; it must come back rescued (replayed). */
async function rescueOnce(url: string, body: string): Promise<number> {
  const started = performance.now();
  const res = await request(url, { method: 'POST', headers: SDK_HEADERS, body });
  await res.body.arrayBuffer();
  const header = String(res.headers['x-gateway-compaction'] ?? '');
  if (res.statusCode !== 200 || !header.includes('outcome=replayed'))
    throw new Error(`a rescue under load answered ${res.statusCode}, x-gateway-compaction: ${header || '(none)'}`);
  return performance.now() - started;
}

/** The same size, opted out and let through (the fake upstream's size check waived): no rescue. */
async function acceptedOnce(url: string, body: string): Promise<number> {
  const started = performance.now();
  const res = await request(url, {
    method: 'POST',
    headers: { ...SDK_HEADERS, [ACCEPT_ANY_SIZE]: '1', 'x-gateway-compaction': 'off' },
    body,
  });
  await res.body.arrayBuffer();
  if (res.statusCode !== 200) throw new Error(`an accepted request answered ${res.statusCode}`);
  return performance.now() - started;
}
