import { request } from 'undici';
import { buildDist } from './dist.js';
import { runLoad, type LoadResult } from './load.js';
import { machineBusyMs, ownCpuMs } from './machine.js';
import { startProcess, type BenchProcess } from './procs.js';
import { startDistGateway } from './dist-gateway.js';
import { PEERS, startPeer, type Peer, type PeerStart } from './peers.js';
import { measureRescue, type RescueResult } from './rescue.js';
import { measureRescueLoad, type RescueLoadOptions, type RescueLoadResult } from './rescue-load.js';
import {
  agentChatBody,
  BARE_HEADERS,
  BARE_MODEL,
  bareChatBody,
  CHAT_PATH,
  oneStringChatBody,
  SDK_HEADERS,
  smallChatBody,
  streamChatBody,
} from './requests.js';
import { runStreams, type StreamResult } from './streams.js';
import type { UpstreamConfig } from './upstream-config.js';

/**
 * `gateway`: a fresh gateway; `overflowed`: another process of the same build whose tenant and
 * model (the bench's credential, the fake model) overflowed before the load (primeOverflowed):
 * the state a long-running gateway is in.
 */
export type Target = 'floor' | 'gateway' | 'overflowed' | 'direct' | Peer;
export const TARGETS: Target[] = ['direct', 'floor', 'gateway', 'overflowed', ...PEERS];
/**
 * `large`: 1 MiB of many messages (an agent's history); `string`: 1 MiB in one user message (a
 * pasted file, a base64 image); `bare`: a small request as the independent harness sends it.
 */
export type ScenarioName = 'small' | 'bare' | 'large' | 'string' | 'stream';
/** Small requests, the SDK's or the independent harness's: their connections, their targets. */
export const isSmallScenario = (name: ScenarioName): boolean => name === 'small' || name === 'bare';

export interface BenchOptions {
  /** Rounds per scenario; each round runs every target once, in alternating order. */
  rounds: number;
  /** Length of one target's run in a round. */
  seconds: number;
  /** Instead of `seconds`, a load run's length in requests (the smoke run: on a loaded machine, one second may hold none). */
  requests?: number;
  /** An unrecorded run per target before a scenario's rounds (JIT, connection pools). */
  warmupSeconds: number;
  scenarios: ScenarioName[];
  /** Also run the clients straight at the fake upstream, for reference. */
  direct: boolean;
  /** Run nginx, HAProxy and Portkey beside the gateway where they are installed (bench/peers.ts). */
  peers: boolean;
  smallConnections: number;
  largeConnections: number;
  largeBytes: number;
  streamConcurrency: number;
  streamEvents: number;
  streamGapMs: number;
  answerBytes: number;
  /** The rescue path (compaction timing and memory, rescued requests end to end); null skips it. */
  rescue: { compactRuns: number; requests: number; summaryDelayMs: number } | null;
  /** Rescues beside a steady flow of small requests (bench/rescue-load.ts); null skips it. */
  rescueLoad: Omit<RescueLoadOptions, 'log'> | null;
  /** Runs during which other processes used over a tenth of a core are run again, this many times at most. */
  disturbedRetries: number;
  /** Compile src/ to dist/ first (the test suite's smoke run relies on `pretest` instead). */
  build: boolean;
  log: (line: string) => void;
}

const BASE = {
  scenarios: ['small', 'bare', 'large', 'string', 'stream'] as ScenarioName[],
  smallConnections: 32,
  largeConnections: 8,
  largeBytes: 1024 * 1024,
  streamConcurrency: 16,
  streamEvents: 50,
  streamGapMs: 5,
  answerBytes: 800,
  log: (line: string) => process.stderr.write(`${line}\n`),
};

export const PRESETS = {
  full: {
    ...BASE,
    rounds: 5,
    seconds: 3,
    warmupSeconds: 2,
    direct: true,
    peers: true,
    rescue: { compactRuns: 15, requests: 3, summaryDelayMs: 100 },
    rescueLoad: { rounds: 3, seconds: 6, smallRate: 500, everyMs: 500, summaryDelayMs: 100 },
    disturbedRetries: 2,
    build: true,
  },
  quick: {
    ...BASE,
    rounds: 2,
    seconds: 1,
    warmupSeconds: 1,
    direct: false,
    peers: true,
    rescue: { compactRuns: 5, requests: 1, summaryDelayMs: 100 },
    rescueLoad: { rounds: 2, seconds: 4, smallRate: 500, everyMs: 500, summaryDelayMs: 100 },
    disturbedRetries: 1,
    build: true,
  },
  /** The test suite's smoke run: numbers, not meaningful ones. */
  smoke: {
    ...BASE,
    rounds: 1,
    seconds: 1,
    requests: 200,
    warmupSeconds: 0,
    direct: false,
    peers: false,
    scenarios: ['small', 'bare'] as ScenarioName[],
    rescue: null,
    rescueLoad: null,
    disturbedRetries: 0,
    build: false,
  },
} satisfies Record<string, BenchOptions>;

/** One target's run in one round. Stream runs fill `stream`; load runs fill `load`. */
export interface Run {
  load?: LoadResult;
  stream?: StreamResult;
  /** Proxy CPU time (user + system) per request or stream, in microseconds; NaN for `direct`. */
  cpuUsPerRequest: number;
  /** CPU used meanwhile by processes other than the bench's, in cores (NaN off Linux). */
  foreignCores: number;
}

export interface ScenarioResult {
  name: ScenarioName;
  runs: Record<Target, Run[]>;
}

export interface BenchResult {
  options: BenchOptions;
  startedAt: Date;
  elapsedS: number;
  scenarios: ScenarioResult[];
  peakRssBytes: { floor: number; gateway: number; overflowed: number };
  /** Each peer's version, or why it did not run; absent when the run had no peers. */
  peers: Partial<Record<Peer, Omit<PeerStart, 'proc'>>>;
  rescue: RescueResult | null;
  rescueLoad: RescueLoadResult | null;
}

export async function runBench(options: BenchOptions): Promise<BenchResult> {
  const startedAt = new Date();
  const began = performance.now();
  if (options.build) {
    options.log('bench: building dist/ (the gateway is measured as it ships)');
    buildDist();
  }
  const upstreamConfig: UpstreamConfig = {
    answerBytes: options.answerBytes,
    streamEvents: options.streamEvents,
    streamGapMs: options.streamGapMs,
    summaryDelayMs: 0,
    // A window above every load's body: only the overflowed gateway's priming requests pass it.
    limitBytes: Math.round(options.largeBytes * 1.5),
  };
  const started: BenchProcess[] = [];
  const start = async (name: string, script: string, config: unknown) => {
    const proc = await startProcess(name, script, config);
    started.push(proc);
    return proc;
  };
  try {
    const upstream = await start('upstream', 'upstream.ts', upstreamConfig);
    const gateway = (name: string) => startDistGateway(name, { UPSTREAM_URL: `${upstream.origin}/v1` }).then((p) => (started.push(p), p));
    const procs = {
      upstream,
      floor: await start('floor', 'floor.ts', { upstream: upstream.origin }),
      gateway: await gateway('gateway'),
      overflowed: await gateway('overflowed'),
    };
    await primeOverflowed(procs.overflowed, options);
    const peers: BenchResult['peers'] = {};
    const peerProcs: Partial<Record<Peer, BenchProcess>> = {};
    for (const peer of options.peers ? PEERS : []) {
      const { proc, ...about } = await startPeer(peer, upstream.origin);
      peers[peer] = about;
      if (proc) {
        started.push(proc);
        peerProcs[peer] = proc;
      }
      options.log(proc ? `bench: ${about.version} runs beside the gateway` : `bench: ${about.skipped}; skipped`);
    }
    const targets: Target[] = [
      'floor',
      'gateway',
      'overflowed',
      ...(Object.keys(peerProcs) as Peer[]),
      ...(options.direct ? ['direct' as const] : []),
    ];
    const proxyOf = (t: Target): BenchProcess | null =>
      t === 'direct' ? null : t === 'floor' || t === 'gateway' || t === 'overflowed' ? procs[t] : peerProcs[t]!;
    const origin = (t: Target) => (t === 'direct' ? procs.upstream : proxyOf(t)!).origin;
    await checkTargets(targets.map((t) => proxyOf(t) ?? procs.upstream));
    const scenarios: ScenarioResult[] = [];
    const all = [procs.upstream, procs.floor, procs.gateway, procs.overflowed, ...Object.values(peerProcs)];
    for (const name of options.scenarios) {
      scenarios.push(await runScenario(name, targets, origin, proxyOf, all, options));
    }
    const peakRssBytes = {
      floor: (await procs.floor.stats()).maxRssBytes,
      gateway: (await procs.gateway.stats()).maxRssBytes,
      overflowed: (await procs.overflowed.stats()).maxRssBytes,
    };
    for (const proc of started.splice(0)) await proc.stop();
    const rescue = options.rescue ? await measureRescue({ ...options.rescue, log: options.log }) : null;
    const rescueLoad = options.rescueLoad ? await measureRescueLoad({ ...options.rescueLoad, log: options.log }) : null;
    return { options, startedAt, elapsedS: (performance.now() - began) / 1000, scenarios, peakRssBytes, peers, rescue, rescueLoad };
  } finally {
    for (const proc of started) await proc.stop();
  }
}

async function runScenario(
  name: ScenarioName,
  targets: Target[],
  origin: (t: Target) => string,
  proxy: (t: Target) => BenchProcess | null,
  all: BenchProcess[],
  options: BenchOptions,
): Promise<ScenarioResult> {
  const runs = Object.fromEntries(TARGETS.map((t) => [t, []])) as unknown as Record<Target, Run[]>;
  const once = makeRun(name, all, options);
  if (options.warmupSeconds > 0) {
    for (const t of targets) await once(origin(t), null, options.warmupSeconds, proxy(t)?.headers);
  }
  for (let round = 0; round < options.rounds; round++) {
    // A B, B A, A B...: a drift in the machine's speed weighs on both targets alike.
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const t of order) {
      let run = await once(origin(t), proxy(t), options.seconds, proxy(t)?.headers);
      // Another process took a share of the two cores: that run says little; run it again.
      for (let retry = 0; retry < options.disturbedRetries && run.foreignCores > DISTURBED_CORES; retry++) {
        options.log(`${name} round ${round + 1}/${options.rounds} ${t.padEnd(7)} disturbed (${describe(run)}); again`);
        run = await once(origin(t), proxy(t), options.seconds, proxy(t)?.headers);
      }
      runs[t].push(run);
      options.log(`${name} round ${round + 1}/${options.rounds} ${t.padEnd(7)} ${describe(run)}`);
    }
  }
  return { name, runs };
}

/** Other processes using more than this share of a core make a run worth repeating. */
export const DISTURBED_CORES = 0.1;

/**
 * A function that runs the scenario once against one target, measuring the proxy's CPU and
 * whatever CPU the machine spent outside the bench's processes meanwhile.
 */
function makeRun(name: ScenarioName, all: BenchProcess[], options: BenchOptions) {
  const small = name === 'bare' ? bareChatBody() : smallChatBody();
  const large = name === 'large' ? agentChatBody(options.largeBytes) : name === 'string' ? oneStringChatBody(options.largeBytes) : '';
  const streamed = streamChatBody();
  return async (origin: string, proxy: BenchProcess | null, seconds: number, extra?: Record<string, string>): Promise<Run> => {
    const headers = { ...(name === 'bare' ? BARE_HEADERS : SDK_HEADERS), ...extra };
    const before = await proxy?.stats();
    const accounted = await benchCpuMs(all);
    const machine = machineBusyMs();
    const started = performance.now();
    const url = `${origin}${CHAT_PATH}`;
    let run: Run;
    if (name === 'stream') {
      const stream = await runStreams({
        url,
        body: streamed,
        headers,
        concurrency: options.streamConcurrency,
        seconds,
        events: options.streamEvents,
        gapMs: options.streamGapMs,
      });
      run = { stream, cpuUsPerRequest: Number.NaN, foreignCores: Number.NaN };
    } else {
      const body = isSmallScenario(name) ? small : large;
      const connections = isSmallScenario(name) ? options.smallConnections : options.largeConnections;
      run = {
        load: await runLoad({ url, body, headers, connections, seconds, requests: options.requests }),
        cpuUsPerRequest: Number.NaN,
        foreignCores: Number.NaN,
      };
    }
    const elapsedMs = performance.now() - started;
    const machineAfter = machineBusyMs();
    if (machine !== undefined && machineAfter !== undefined) {
      run.foreignCores = Math.max(0, machineAfter - machine - ((await benchCpuMs(all)) - accounted)) / elapsedMs;
    }
    const after = await proxy?.stats();
    const count = run.load?.responses ?? run.stream?.streams ?? 0;
    if (before && after && count > 0) run.cpuUsPerRequest = ((after.cpuMs - before.cpuMs) * 1000) / count;
    return run;
  };
}

/** CPU time of the bench's own processes: the load generator (this one) and its children. */
async function benchCpuMs(all: BenchProcess[]): Promise<number> {
  let total = ownCpuMs();
  for (const proc of all) total += (await proc.stats()).cpuMs;
  return total;
}

function describe(run: Run): string {
  const foreign = Number.isNaN(run.foreignCores) ? '' : ` other processes ${(run.foreignCores * 100).toFixed(0)}% of a core`;
  const cpu = (Number.isNaN(run.cpuUsPerRequest) ? '' : ` cpu ${run.cpuUsPerRequest.toFixed(0)} us/req`) + foreign;
  if (run.load) {
    const l = run.load;
    return `${l.rps.toFixed(0)} req/s p50 ${l.p50Ms.toFixed(2)} ms p99 ${l.p99Ms.toFixed(2)} ms${cpu}${l.failures ? ` FAILURES ${l.failures}` : ''}`;
  }
  const s = run.stream!;
  return `${s.streams} streams ttfb p50 ${s.ttfbP50Ms.toFixed(2)} ms total p50 ${s.totalP50Ms.toFixed(1)} ms chunk delay p99 ${s.chunkDelayP99Ms.toFixed(2)} ms reads/event ${s.readsPerEvent.toFixed(3)}${cpu}${s.failures ? ` FAILURES ${s.failures}` : ''}`;
}

/**
 * What a gateway that has run a while has seen, for the bench's tenant (its credential) and model:
 * a request nothing could shrink, refused for length (a learned limit, `not_shrunk`), and an agent
 * conversation refused, compacted and replayed (a remembered compaction). Each is checked. The
 * `bare` scenario's tenant and model get the refusal too, as the independent harness's checks
 * give its gateway one before the load.
 */
async function primeOverflowed(gateway: BenchProcess, options: BenchOptions): Promise<void> {
  const overlong = options.largeBytes * 2;
  const sends: Array<[Record<string, string>, string, string, number]> = [
    [SDK_HEADERS, oneStringChatBody(overlong), 'outcome=not_shrunk', 400],
    [SDK_HEADERS, agentChatBody(overlong, 11), 'outcome=replayed', 200],
    [BARE_HEADERS, oneStringChatBody(overlong, BARE_MODEL), 'outcome=not_shrunk', 400],
  ];
  for (const [headers, body, outcome, status] of sends) {
    const res = await request(`${gateway.origin}${CHAT_PATH}`, { method: 'POST', headers, body });
    await res.body.arrayBuffer();
    const header = String(res.headers['x-gateway-compaction'] ?? '');
    if (res.statusCode !== status || !header.includes(outcome))
      throw new Error(
        `priming the overflowed gateway: ${res.statusCode}, x-gateway-compaction: ${header || '(none)'}; expected ${status} ${outcome}`,
      );
  }
}

/**
 * Every target must answer a small request with a 200 and the same answer before anything is
 * timed: the same bytes, or for Portkey (which re-serialises the upstream's JSON) the same JSON.
 */
async function checkTargets(procs: BenchProcess[]): Promise<void> {
  const answers: string[] = [];
  for (const { origin, headers, name } of procs) {
    const res = await request(`${origin}${CHAT_PATH}`, { method: 'POST', headers: { ...SDK_HEADERS, ...headers }, body: smallChatBody() });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`${origin} answered ${res.statusCode}: ${text.slice(0, 300)}`);
    answers.push(name === 'portkey' ? JSON.stringify(JSON.parse(text)) : text);
  }
  if (new Set(answers).size !== 1) throw new Error(`the targets answered the same request differently:\n${answers.join('\n')}`);
}
