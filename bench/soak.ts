/**
 * Load and soak: mixed traffic through the built gateway for a bounded time, on loopback.
 *
 *   npm run soak -- [--duration 60] [--concurrency 96] [--max-requests 0] [--phases 3] [--warmup 300] [--memory] [--json] [--no-build]
 *
 * The bench's processes: the gateway as it ships (gateway.ts, dist/, under --expose-gc so its
 * heap can be measured after full collections, its log lines read from its stdout) and the fake
 * upstream (upstream.ts), which refuses bodies over 60 KB as overlong (so ~10% of requests are
 * rescued), answers as the summarizer and parses bodies as a provider does. This process plays
 * the clients; some abort mid-stream or before the headers. At the end: requests done, errors by
 * kind (expected and unexpected), latency percentiles, and the gateway's RSS, heap and open
 * handles at rest before and after the load. Exits 1 if anything unexpected happened or the
 * gateway did not return to its starting level.
 */
import { pathToFileURL } from 'node:url';
import { Agent, request } from 'undici';
import type { ConfigInput } from '../src/config/schema.js';
import { buildDist } from './dist.js';
import { ownCpuMs } from './machine.js';
import { startProcess, type BenchProcess, type ProcStats } from './procs.js';
import { agentChatBody, CHAT_PATH, SDK_HEADERS, smallChatBody, streamChatBody } from './requests.js';
import { percentile } from './stats.js';
import { BAD_JSON_MESSAGE, HOLD_ANSWER, MODEL, type UpstreamConfig } from './upstream-config.js';

export interface SoakOptions {
  durationMs: number;
  concurrency: number;
  /** Stop after this many requests even if time is left (0: no limit). */
  maxRequests: number;
  /** The load is split into this many phases, with a measurement at rest after each. */
  phases: number;
  /** Requests sent before the "start" measurement, so pools and JIT are warm. */
  warmupRequests: number;
  /**
   * Keep the compaction memory on (the gateway's default). Off by default here: it is a cache of
   * every rescued conversation (an LRU bounded by memory.maxBytes), so with it the heap grows by
   * design and a leak could hide in that growth.
   */
  memory?: boolean;
  /** Compile src/ to dist/ first (`npm run soak` does; the test suite relies on `pretest`). */
  build?: boolean;
  log?: (line: string) => void;
}

export interface ResourceSnapshot {
  rssBytes: number;
  heapUsedBytes: number;
  heapTotalBytes: number;
  externalBytes: number;
  handles: Record<string, number>;
}

export interface SoakReport {
  options: Omit<SoakOptions, 'log' | 'build'>;
  elapsedMs: number;
  requests: number;
  byKind: Record<string, number>;
  expected: Record<string, number>;
  unexpected: Record<string, number>;
  unexpectedSamples: string[];
  latencyMs: Record<string, { count: number; p50: number; p99: number; max: number }>;
  start: ResourceSnapshot;
  end: ResourceSnapshot;
  /** Heap used at rest (after full collections): before the load, then after each phase. */
  restHeapBytes: number[];
  peakRssBytes: number;
  cpuCores: { gateway: number; loadAndUpstream: number };
  gatewayLog: Record<string, number>;
  gatewayErrorSamples: string[];
  upstreamLeftOpen: number;
  /** Heap and handles back to their starting level. */
  settled: { heap: boolean; handles: boolean };
}

const LIMIT_BYTES = 60_000;
/** An agent conversation of ~120 KB: over the upstream's 60 KB, so it is rescued. */
const RESCUED_BYTES = 100_000;
const HEAP_SLACK_BYTES = 4 * 1024 * 1024;
const HEAP_SLACK_SHARE = 0.1;
/** Polls for the gateway's handles to settle at rest, 250 ms apart. */
const REST_POLLS = 40;

const UPSTREAM: UpstreamConfig = {
  answerBytes: 400,
  answerDelayMs: 10,
  streamEvents: 9,
  streamGapMs: 3,
  limitBytes: LIMIT_BYTES,
  summaryDelayMs: 12,
  parseBodies: true,
  // Idle keep-alive connections close soon, so the gateway's sockets settle quickly at rest.
  keepAliveMs: 500,
};

function gatewayConfig(upstreamOrigin: string, memory: boolean): ConfigInput {
  return {
    upstream: { url: `${upstreamOrigin}/v1`, firstByteTimeoutMs: 30_000, idleTimeoutMs: 30_000 },
    summarizer: { maxInputTokens: 500_000, timeoutMs: 10_000 },
    log: { level: 'info' },
    memory: { enabled: memory },
  };
}

/** The gateway's log lines by level, and the first error lines. */
class LogTally {
  readonly levels: Record<string, number> = {};
  readonly errorSamples: string[] = [];

  line = (line: string): void => {
    if (!line) return;
    const level = Number(/"level":(\d+)/.exec(line)?.[1] ?? 0);
    const name = level >= 50 ? 'error' : level >= 40 ? 'warn' : 'info';
    this.levels[name] = (this.levels[name] ?? 0) + 1;
    if (level >= 50 && this.errorSamples.length < 5) this.errorSamples.push(line.slice(0, 500));
  };
}

// ---------------------------------------------------------------------------------------------
// The clients

type Kind = 'chat' | 'stream' | 'rescue' | 'rescue_stream' | 'abort_mid_stream' | 'abort_before_headers' | 'bad_json' | 'models';

/** Cumulative shares: 10% rescued, 9% clients aborting, 3% invalid bodies. */
const MIX: Array<[Kind, number]> = [
  ['chat', 0.38],
  ['stream', 0.35],
  ['rescue', 0.05],
  ['rescue_stream', 0.05],
  ['abort_mid_stream', 0.05],
  ['abort_before_headers', 0.04],
  ['bad_json', 0.03],
  ['models', 0.05],
];

interface Outcome {
  kind: Kind;
  /** `ok`, an expected error kind, or `unexpected:<what>`. */
  result: string;
  ms: number;
  detail?: string;
}

const SMALL = smallChatBody();
const STREAMED = streamChatBody();
const AGENT = JSON.parse(agentChatBody(RESCUED_BYTES)) as { messages: Array<{ content?: unknown }> };

/**
 * The agent conversation as conversation `seq`: a first message of its own, so that with the
 * compaction memory on no rescue is a conversation the gateway has seen before.
 */
function rescuedBody(seq: number, stream: boolean): string {
  const [first, ...rest] = AGENT.messages;
  return JSON.stringify({ ...AGENT, stream, messages: [{ ...first, content: `${String(first.content)}\nSession ${seq}.` }, ...rest] });
}

function pick(r: number): Kind {
  let acc = 0;
  for (const [kind, share] of MIX) {
    acc += share;
    if (r < acc) return kind;
  }
  return 'chat';
}

async function one(agent: Agent, origin: string, kind: Kind, seq: number): Promise<Outcome> {
  const started = performance.now();
  const done = (result: string, detail?: string): Outcome => ({ kind, result, ms: performance.now() - started, detail });
  const post = (body: string, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    request(`${origin}${CHAT_PATH}`, { method: 'POST', dispatcher: agent, headers: { ...SDK_HEADERS, ...headers }, body, signal });
  try {
    switch (kind) {
      case 'chat': {
        const res = await post(SMALL);
        const text = await res.body.text();
        return res.statusCode === 200 && text.includes('"choices"')
          ? done('ok')
          : done(`unexpected:status_${res.statusCode}`, text.slice(0, 200));
      }
      case 'stream':
      case 'rescue_stream':
      case 'rescue': {
        const res = await post(kind === 'stream' ? STREAMED : rescuedBody(seq, kind === 'rescue_stream'));
        const text = await res.body.text();
        if (res.statusCode !== 200) return done(`unexpected:status_${res.statusCode}`, text.slice(0, 200));
        if (kind !== 'rescue' && !text.endsWith('data: [DONE]\n\n')) return done('unexpected:stream_without_done', text.slice(-200));
        if (kind !== 'stream' && !/outcome=replayed/.test(String(res.headers['x-gateway-compaction']))) {
          return done('unexpected:not_replayed', String(res.headers['x-gateway-compaction']));
        }
        return done('ok');
      }
      case 'abort_mid_stream': {
        const abort = new AbortController();
        const res = await post(STREAMED, {}, abort.signal);
        if (res.statusCode !== 200) return done(`unexpected:status_${res.statusCode}`);
        await res.body[Symbol.asyncIterator]().next();
        abort.abort();
        await res.body.text().catch(() => undefined);
        return done('client_aborted_mid_stream');
      }
      case 'abort_before_headers': {
        const abort = new AbortController();
        const timer = setTimeout(() => abort.abort(), 30);
        try {
          // The upstream holds this one until the gateway gives up on it (its client went away).
          const res = await post(SMALL, { [HOLD_ANSWER]: '1' }, abort.signal);
          await res.body.text();
          return done(`unexpected:answered_${res.statusCode}`);
        } catch (err) {
          return abort.signal.aborted ? done('client_aborted_before_headers') : done('unexpected:network', String(err));
        } finally {
          clearTimeout(timer);
        }
      }
      case 'bad_json': {
        // What the provider answers: the gateway relays it, having never parsed the body itself.
        const res = await post(`{"model": "${MODEL}", "messages": [`);
        const text = await res.body.text();
        return res.statusCode === 400 && text.includes(BAD_JSON_MESSAGE)
          ? done('invalid_json')
          : done(`unexpected:status_${res.statusCode}`, text.slice(0, 200));
      }
      case 'models': {
        const res = await request(`${origin}/v1/models`, { dispatcher: agent, headers: { authorization: SDK_HEADERS.authorization } });
        const text = await res.body.text();
        return res.statusCode === 200 && text.includes(MODEL) ? done('ok') : done(`unexpected:status_${res.statusCode}`);
      }
    }
  } catch (err) {
    return done('unexpected:network', `${(err as Error).name}: ${(err as Error).message}`);
  }
}

/** Runs `count` requests (or until `deadline`) on `concurrency` workers; `count` 0 means no limit. */
async function drive(origin: string, concurrency: number, deadline: number, count: number, onOutcome: (o: Outcome) => void): Promise<void> {
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 4_000 });
  let seq = 0;
  const worker = async () => {
    while (performance.now() < deadline && (count === 0 || seq < count)) {
      const n = seq++;
      onOutcome(await one(agent, origin, pick(Math.random()), n));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  await agent.close();
}

// ---------------------------------------------------------------------------------------------
// The run

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Measures after full collections once the gateway's open handles stop changing (kept-alive
 * sockets closing, the last log lines written): the same handles twice in a row, no socket.
 */
async function atRest(gateway: BenchProcess): Promise<ResourceSnapshot> {
  let last = '';
  let stats = await gateway.stats({ memory: 'afterGc' });
  for (let i = 0; i < REST_POLLS; i++) {
    await sleep(250);
    stats = await gateway.stats({ memory: 'afterGc' });
    const now = JSON.stringify(stats.memory!.handles);
    if (now === last && !stats.memory!.handles.TCPSocketWrap) break;
    last = now;
  }
  return snapshot(stats);
}

function snapshot(stats: ProcStats): ResourceSnapshot {
  const { heapUsedBytes, heapTotalBytes, externalBytes, handles } = stats.memory!;
  return { rssBytes: stats.rssBytes, heapUsedBytes, heapTotalBytes, externalBytes, handles };
}

/** CPU of the clients (this process) and of the fake upstream, in milliseconds. */
async function loadCpuMs(upstream: BenchProcess): Promise<number> {
  return ownCpuMs() + (await upstream.stats()).cpuMs;
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const log = options.log ?? (() => undefined);
  if (options.build) {
    log('soak: building dist/ (the gateway is soaked as it ships)');
    buildDist();
  }
  const upstream = await startProcess('upstream', 'upstream.ts', UPSTREAM);
  const gatewayLog = new LogTally();
  let gateway: BenchProcess | undefined;
  try {
    gateway = await startProcess(
      'gateway',
      'gateway.ts',
      gatewayConfig(upstream.origin, options.memory ?? false),
      ['--expose-gc'],
      gatewayLog.line,
    );
    log(`gateway at ${gateway.origin}; warming up with ${options.warmupRequests} requests`);
    await drive(gateway.origin, options.concurrency, Number.POSITIVE_INFINITY, options.warmupRequests, () => undefined);
    const start = await atRest(gateway);
    log(`at rest: heap ${mb(start.heapUsedBytes)}, rss ${mb(start.rssBytes)}, handles ${JSON.stringify(start.handles)}`);

    const outcomes: Outcome[] = [];
    const restHeap = [start.heapUsedBytes];
    let elapsedMs = 0;
    let gatewayCpuMs = 0;
    let loadMs = 0;
    let end = start;
    // The load comes in phases with a rest between them: a leak shows as a heap that keeps
    // climbing from rest to rest, a cache or warm-up as one that levels off.
    for (let phase = 0; phase < options.phases; phase++) {
      const gatewayBefore = (await gateway.stats()).cpuMs;
      const loadBefore = await loadCpuMs(upstream);
      const begun = performance.now();
      const progress = setInterval(() => {
        void gateway!.stats({ memory: 'now' }).then(
          (s) => {
            log(
              `${Math.round((elapsedMs + performance.now() - begun) / 1000)} s: ${outcomes.length} requests, gateway heap ${mb(s.memory!.heapUsedBytes)}, rss ${mb(s.rssBytes)}`,
            );
          },
          () => undefined,
        );
      }, 5_000);
      const left = options.maxRequests === 0 ? 0 : Math.max(1, options.maxRequests - outcomes.length);
      try {
        await drive(gateway.origin, options.concurrency, begun + options.durationMs / options.phases, left, (o) => outcomes.push(o));
      } finally {
        clearInterval(progress);
      }
      elapsedMs += performance.now() - begun;
      loadMs += (await loadCpuMs(upstream)) - loadBefore;
      gatewayCpuMs += (await gateway.stats()).cpuMs - gatewayBefore;
      end = await atRest(gateway);
      restHeap.push(end.heapUsedBytes);
      log(
        `at rest after phase ${phase + 1}/${options.phases}: heap ${mb(end.heapUsedBytes)}, rss ${mb(end.rssBytes)}, handles ${JSON.stringify(end.handles)}`,
      );
      if (options.maxRequests > 0 && outcomes.length >= options.maxRequests) break;
    }
    const last = await gateway.stats();
    const upstreamLeftOpen = (await upstream.stats()).extra?.unfinished ?? Number.NaN;
    return report(options, outcomes, elapsedMs, {
      start,
      end,
      restHeapBytes: restHeap,
      peakRssBytes: last.maxRssBytes,
      cpuCores: { gateway: gatewayCpuMs / elapsedMs, loadAndUpstream: loadMs / elapsedMs },
      gatewayLog: { ...gatewayLog.levels },
      gatewayErrorSamples: gatewayLog.errorSamples,
      upstreamLeftOpen,
    });
  } finally {
    await gateway?.stop();
    await upstream.stop();
  }
}

type Measured = Pick<
  SoakReport,
  'start' | 'end' | 'restHeapBytes' | 'peakRssBytes' | 'cpuCores' | 'gatewayLog' | 'gatewayErrorSamples' | 'upstreamLeftOpen'
>;

function report(options: SoakOptions, outcomes: Outcome[], elapsedMs: number, measured: Measured): SoakReport {
  const byKind: Record<string, number> = {};
  const expected: Record<string, number> = {};
  const unexpected: Record<string, number> = {};
  const unexpectedSamples: string[] = [];
  const latencies: Record<string, number[]> = { all: [] };
  for (const o of outcomes) {
    byKind[o.kind] = (byKind[o.kind] ?? 0) + 1;
    if (o.result.startsWith('unexpected:')) {
      const what = o.result.slice('unexpected:'.length);
      unexpected[what] = (unexpected[what] ?? 0) + 1;
      if (unexpectedSamples.length < 10) unexpectedSamples.push(`${o.kind} ${o.result} ${o.detail ?? ''}`);
    } else if (o.result !== 'ok') {
      expected[o.result] = (expected[o.result] ?? 0) + 1;
    }
    if (o.result === 'ok' || o.result === 'invalid_json') {
      (latencies[o.kind] ??= []).push(o.ms);
      latencies.all.push(o.ms);
    }
  }
  const latencyMs: SoakReport['latencyMs'] = {};
  for (const [kind, values] of Object.entries(latencies)) {
    const at = (p: number) => (values.length ? round(percentile(values, p)) : 0);
    latencyMs[kind] = { count: values.length, p50: at(50), p99: at(99), max: at(100) };
  }
  const { start, end, cpuCores } = measured;
  const heapLimit = start.heapUsedBytes * (1 + HEAP_SLACK_SHARE) + HEAP_SLACK_BYTES;
  const handlesBack = Object.entries(end.handles).every(([type, n]) => n <= (start.handles[type] ?? 0));
  const { log: _log, build: _build, ...shown } = options;
  return {
    options: shown,
    elapsedMs: round(elapsedMs),
    requests: outcomes.length,
    byKind,
    expected,
    unexpected,
    unexpectedSamples,
    latencyMs,
    ...measured,
    cpuCores: { gateway: round(cpuCores.gateway), loadAndUpstream: round(cpuCores.loadAndUpstream) },
    settled: { heap: end.heapUsedBytes <= heapLimit, handles: handlesBack },
  };
}

const round = (n: number) => Math.round(n * 100) / 100;
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

export function formatReport(r: SoakReport): string {
  const unexpectedTotal = Object.values(r.unexpected).reduce((a, b) => a + b, 0);
  const lines = [
    `soak: ${r.requests} requests in ${(r.elapsedMs / 1000).toFixed(1)} s (${Math.round(r.requests / (r.elapsedMs / 1000))}/s), concurrency ${r.options.concurrency}, compaction memory ${r.options.memory ? 'on' : 'off'}`,
    `  mix: ${Object.entries(r.byKind)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
    `  expected errors: ${
      Object.entries(r.expected)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'none'
    }`,
    `  unexpected errors: ${unexpectedTotal}${
      unexpectedTotal
        ? ` (${Object.entries(r.unexpected)
            .map(([k, n]) => `${k} ${n}`)
            .join(', ')})`
        : ''
    }`,
    ...r.unexpectedSamples.map((s) => `    ${s}`),
    `  latency (ms, completed requests):`,
    ...Object.entries(r.latencyMs).map(([k, l]) => `    ${k.padEnd(16)} n=${l.count} p50=${l.p50} p99=${l.p99} max=${l.max}`),
    `  cpu: gateway ${r.cpuCores.gateway} cores, clients+upstream ${r.cpuCores.loadAndUpstream} cores`,
    `  gateway at rest, after full GC:   start -> end`,
    `    rss       ${mb(r.start.rssBytes)} -> ${mb(r.end.rssBytes)} (peak under load ${mb(r.peakRssBytes)})`,
    `    heap used ${mb(r.start.heapUsedBytes)} -> ${mb(r.end.heapUsedBytes)} (at rest after each phase: ${r.restHeapBytes.map(mb).join(', ')})`,
    `    handles   ${JSON.stringify(r.start.handles)} -> ${JSON.stringify(r.end.handles)}`,
    `  gateway log lines: ${JSON.stringify(r.gatewayLog)}`,
    ...r.gatewayErrorSamples.map((s) => `    ${s}`),
    `  upstream requests left unfinished: ${r.upstreamLeftOpen}`,
    `  settled: heap ${r.settled.heap ? 'yes' : 'NO'}, handles ${r.settled.handles ? 'yes' : 'NO'}`,
  ];
  return lines.join('\n');
}

/** Nothing unexpected, nothing left open, heap and handles back where they started. */
export function soakPassed(r: SoakReport): boolean {
  return Object.keys(r.unexpected).length === 0 && r.upstreamLeftOpen === 0 && r.settled.heap && r.settled.handles && !r.gatewayLog.error;
}

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const value = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isFinite(value) || value < 0) throw new Error(`--${name} needs a non-negative number`);
  return value;
}

async function cli(): Promise<void> {
  const options: SoakOptions = {
    durationMs: Math.min(arg('duration', 60), 3_600) * 1000,
    concurrency: Math.max(1, Math.min(arg('concurrency', 96), 1_000)),
    maxRequests: arg('max-requests', 0),
    warmupRequests: arg('warmup', 300),
    phases: Math.max(1, Math.min(arg('phases', 3), 20)),
    memory: process.argv.includes('--memory'),
    build: !process.argv.includes('--no-build'),
    log: (line) => process.stderr.write(`${line}\n`),
  };
  const r = await runSoak(options);
  process.stdout.write(process.argv.includes('--json') ? `${JSON.stringify(r, null, 2)}\n` : `${formatReport(r)}\n`);
  process.exitCode = soakPassed(r) ? 0 : 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  cli().catch((err) => {
    process.stderr.write(`soak failed: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  });
}
