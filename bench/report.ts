import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import {
  DISTURBED_CORES,
  isSmallScenario,
  TARGETS,
  type BenchResult,
  type Run,
  type ScenarioName,
  type ScenarioResult,
  type Target,
} from './harness.js';
import { BARE_HEADERS, bareChatBody, smallChatBody } from './requests.js';
import { median } from './stats.js';

/*
 * BENCHMARKS.md from one run: the machine, the versions, the parameters, then every figure as the
 * median over the rounds, with gateway/floor ratios and the issue's targets.
 */

interface Row {
  metric: string;
  values: Partial<Record<Target, number>>;
  digits: number;
  /** How the gateway's figure is judged against the floor's (or on its own). */
  target?: { text: string; met: boolean };
  ratio?: boolean;
}

export interface Verdict {
  target: string;
  met: boolean;
}

export function renderReport(result: BenchResult): { markdown: string; verdicts: Verdict[] } {
  const verdicts: Verdict[] = [];
  const sections = result.scenarios.map((s) => scenarioTable(s, result, verdicts));
  const rescue = result.rescue ? rescueTable(result, verdicts) : '';
  const findings = readFileSync(new URL('findings.md', import.meta.url), 'utf8').trim();
  const markdown = [
    '# Benchmarks',
    '',
    'The gateway against its floor: a bare reverse proxy written directly on undici (`bench/floor.ts`),',
    'driven by autocannon and a streaming client on the same machine, all on 127.0.0.1. Each proxy',
    "and the fake upstream run as separate processes, so each one's CPU time is its own. Targets",
    'are interleaved round by round (A B, B A, ...); every figure is the median over the rounds.',
    'Two gateways of the same build run side by side, as `npm start` runs it: a fresh one, and one',
    'whose tenant and model overflowed before (a learned limit, a remembered compaction), the state',
    "a long-running gateway is in; nginx, HAProxy and Portkey's gateway run beside them where they are",
    'installed (`npm run bench:peers` installs Portkey into bench/portkey).',
    '',
    'Run it with `npm run bench` (10 to 25 minutes, by how loaded the machine is; writes this file)',
    'or `npm run bench -- --quick` (about 4 minutes; prints the tables only).',
    '',
    `## Results`,
    '',
    `Run of ${result.startedAt.toISOString()}, ${Math.round(result.elapsedS)} s, at ${revision()}.`,
    '',
    peersLine(result),
    '',
    ...sections,
    memoryTable(result),
    rescue,
    result.rescueLoad ? rescueLoadTable(result, verdicts) : '',
    '## Targets',
    '',
    '| target | met |',
    '|---|---|',
    ...verdicts.map((v) => `| ${v.target} | ${v.met ? 'yes' : '**no**'} |`),
    '',
    findings,
    '',
    '## Machine, versions, parameters',
    '',
    machine(result),
    '',
  ].join('\n');
  return { markdown, verdicts };
}

const TITLES: Record<ScenarioName, (r: BenchResult) => string> = {
  small: (r) =>
    `Small non-streaming requests (${bytes(Buffer.byteLength(smallChatBody()))} body, ${r.options.smallConnections} connections)`,
  bare: (r) =>
    `Small requests as the independent harness sends them (${Object.keys(BARE_HEADERS).length} headers, ${bytes(Buffer.byteLength(bareChatBody()))} body, ${r.options.smallConnections} connections)`,
  large: (r) => `1 MiB requests of many messages (an agent's history; ${r.options.largeConnections} connections)`,
  string: (r) =>
    `1 MiB requests of one string (one user message: a pasted file, a base64 image; ${r.options.largeConnections} connections)`,
  stream: (r) =>
    `Streams (${r.options.streamConcurrency} concurrent, ${r.options.streamEvents} SSE events ${r.options.streamGapMs} ms apart)`,
};

function scenarioTable(s: ScenarioResult, result: BenchResult, verdicts: Verdict[]): string {
  const rows = s.name === 'stream' ? streamRows(s) : loadRows(s);
  for (const row of rows) if (row.target) verdicts.push({ target: `${s.name}: ${row.metric} ${row.target.text}`, met: row.target.met });
  const portkey = s.name === 'stream' ? undefined : againstPortkey(s);
  if (portkey) verdicts.push({ target: `${s.name}: throughput ≥ 4x Portkey's (${portkey.text})`, met: portkey.met });
  const targets = TARGETS.filter((t) => s.runs[t].length > 0);
  const header = `| metric | ${targets.join(' | ')} | gateway/floor | overflowed/floor | target (both gateways) |`;
  const lines = rows.map((row) => {
    const cells = targets.map((t) => format(row.values[t], row.digits));
    const ratio = (t: Target) => (row.ratio === false ? '' : format(row.values[t]! / row.values.floor!, 2));
    const target = row.target ? `${row.target.text} ${row.target.met ? '✓' : '✗'}` : '';
    return `| ${row.metric} | ${cells.join(' | ')} | ${ratio('gateway')} | ${ratio('overflowed')} | ${target} |`;
  });
  const failures = targets.map((t) => `${t} ${sum(s.runs[t], (r) => r.load?.failures ?? r.stream?.failures ?? 0)}`).join(', ');
  return [
    `### ${TITLES[s.name](result)}`,
    '',
    header,
    `|---|${targets.map(() => '---:').join('|')}|---:|---:|---|`,
    ...lines,
    '',
    ...(portkey ? [`Throughput against Portkey's in the same rounds (median of per-round ratios): ${portkey.text}.`, ''] : []),
    `${s.runs.floor.length} rounds of ${result.options.seconds} s per target. Failed requests (errors, timeouts, non-2xx): ${failures}. ${disturbance(s, result)}`,
    '',
  ].join('\n');
}

/** The issue's target of 4x Portkey's throughput, as the median of each round's ratio. */
function againstPortkey(s: ScenarioResult): { text: string; met: boolean } | undefined {
  if (s.runs.portkey.length === 0) return undefined;
  const ratio = (t: Target) => median(s.runs[t].map((r, i) => r.load!.rps / s.runs.portkey[i].load!.rps));
  const gateway = ratio('gateway');
  const overflowed = ratio('overflowed');
  return {
    text: `gateway ${gateway.toFixed(1)}x, overflowed ${overflowed.toFixed(1)}x`,
    met: Math.min(gateway, overflowed) >= 4,
  };
}

/** How much other processes on the machine used while the recorded runs ran. */
function disturbance(s: ScenarioResult, result: BenchResult): string {
  const foreign = TARGETS.flatMap((t) => s.runs[t].map((r) => r.foreignCores)).filter((c) => !Number.isNaN(c));
  if (foreign.length === 0) return '';
  const pct = (c: number) => `${Math.round(c * 100)}%`;
  return (
    `Other processes used ${pct(median(foreign))} of a core during the median run, ${pct(Math.max(...foreign))} at most ` +
    `(a run over ${pct(DISTURBED_CORES)} is run again, ${result.options.disturbedRetries} times at most).`
  );
}

/** Which peers ran beside the gateway, and why any did not. */
function peersLine(result: BenchResult): string {
  const ran = Object.values(result.peers).flatMap((p) => (p.version ? [p.version] : []));
  const skipped = Object.values(result.peers).flatMap((p) => (p.skipped ? [p.skipped] : []));
  return [
    `Peers: ${ran.length > 0 ? `${ran.join('; ')} (one process or worker each, keep-alive upstream, no access log)` : 'none ran'}.`,
    ...skipped.map((s) => `Skipped: ${s}.`),
  ].join(' ');
}

function memoryTable(result: BenchResult): string {
  const peak = result.peakRssBytes;
  return [
    '### Memory',
    '',
    '| measure | floor | gateway | overflowed | gateway/floor |',
    '|---|---:|---:|---:|---:|',
    `| peak RSS over the scenarios above | ${bytes(peak.floor)} | ${bytes(peak.gateway)} | ${bytes(peak.overflowed)} | ${(peak.gateway / peak.floor).toFixed(2)} |`,
    '',
  ].join('\n');
}

function loadRows(s: ScenarioResult): Row[] {
  const m = (pick: (r: Run) => number) => medians(s, pick);
  const rps = m((r) => r.load!.rps);
  const p99 = m((r) => r.load!.p99Ms);
  const cpu = m((r) => r.cpuUsPerRequest);
  const rows: Row[] = [
    { metric: 'throughput (req/s)', values: rps, digits: 0 },
    { metric: 'latency p50 (ms)', values: m((r) => r.load!.p50Ms), digits: 2 },
    { metric: 'latency p99 (ms)', values: p99, digits: 2 },
    { metric: 'proxy CPU per request (µs)', values: cpu, digits: 0 },
  ];
  // The issue's targets (47): small 0.75x throughput, 1.5x CPU and p99; 1 MiB of either shape 0.9x throughput, 1.5x CPU.
  const isSmall = isSmallScenario(s.name);
  rows[0].target = atLeast(rps, isSmall ? 0.75 : 0.9);
  rows[3].target = atMost(cpu, 1.5);
  if (isSmall) rows[2].target = atMost(p99, 1.5);
  return rows;
}

function streamRows(s: ScenarioResult): Row[] {
  const m = (pick: (r: Run) => number) => medians(s, pick);
  const ttfb = m((r) => r.stream!.ttfbP50Ms);
  const coalesced = Object.fromEntries(TARGETS.map((t) => [t, sum(s.runs[t], (r) => r.stream!.coalescedStreams)])) as Record<
    Target,
    number
  >;
  const added = Math.max(ttfb.gateway! - ttfb.floor!, (ttfb.overflowed ?? ttfb.gateway!) - ttfb.floor!);
  return [
    { metric: 'streams per run', values: m((r) => r.stream!.streams), digits: 0, ratio: false },
    {
      metric: 'time to first byte p50 (ms)',
      values: ttfb,
      digits: 3,
      target: { text: `≤ floor + 0.5 ms (+${added.toFixed(3)} ms)`, met: added <= 0.5 },
    },
    { metric: 'time to first byte p99 (ms)', values: m((r) => r.stream!.ttfbP99Ms), digits: 3 },
    { metric: 'total time p50 (ms)', values: m((r) => r.stream!.totalP50Ms), digits: 1 },
    { metric: 'chunk delay p50, upstream write → client (ms)', values: m((r) => r.stream!.chunkDelayP50Ms), digits: 3 },
    { metric: 'chunk delay p99 (ms)', values: m((r) => r.stream!.chunkDelayP99Ms), digits: 3 },
    { metric: 'client reads per upstream write', values: m((r) => r.stream!.readsPerEvent), digits: 3, ratio: false },
    {
      metric: 'streams with coalesced chunks (all rounds)',
      values: coalesced,
      digits: 0,
      ratio: false,
      target: { text: '= 0', met: coalesced.gateway === 0 && coalesced.overflowed === 0 },
    },
    { metric: 'proxy CPU per stream (µs)', values: m((r) => r.cpuUsPerRequest), digits: 0 },
  ];
}

function rescueTable(result: BenchResult, verdicts: Verdict[]): string {
  const r = result.rescue!;
  const c = r.compact;
  const timeMet = c.medianMs < 100;
  const memoryMet = c.peakExtraHeapBytes < 3 * c.bodyBytes;
  verdicts.push({ target: `rescue: compaction (fallback) of the 7 MB conversation < 100 ms (${c.medianMs.toFixed(1)} ms)`, met: timeMet });
  verdicts.push({
    target: `rescue: compaction's extra memory < 3x its size (${(c.peakExtraHeapBytes / c.bodyBytes).toFixed(2)}x)`,
    met: memoryMet,
  });
  const e2e = r.endToEnd.map(
    (e) =>
      `| rescued request, ${e.strategy} | ${e.totalMs.toFixed(0)} | ${e.summarizerMs.toFixed(0)} (${e.summarizerCalls} calls) | **${e.gatewayShareMs.toFixed(0)}** | ${e.gatewayCpuMs.toFixed(0)} |`,
  );
  const summaryDelay = result.options.rescue!.summaryDelayMs;
  return [
    `### The rescue path`,
    '',
    `Compaction in a fresh process (\`bench/compact.ts\`, --expose-gc): \`compact()\` with the fallback strategy over`,
    `the ${bytes(c.bodyBytes)}, ${c.messages.toLocaleString('en')}-message agent conversation of \`test/compaction/conversations.ts\``,
    `after a 128k-token context_length_exceeded, down to ${c.messagesAfter} messages, ${bytes(c.bytesAfter)}.`,
    '',
    '| measure | value | target |',
    '|---|---:|---|',
    `| compaction time, median of ${c.runs} (ms) | ${c.medianMs.toFixed(1)} | < 100 ${timeMet ? '✓' : '✗'} |`,
    `| compaction time, fastest (ms) | ${c.minMs.toFixed(1)} | |`,
    `| peak extra heap during one compaction | ${bytes(c.peakExtraHeapBytes)} (${(c.peakExtraHeapBytes / c.bodyBytes).toFixed(2)}x the body) | < 3x ${memoryMet ? '✓' : '✗'} |`,
    `| heap allocated by one compaction | ${bytes(c.allocatedBytes)} | |`,
    `| Parse of the body (piece by piece, as the route does), which the rescue path needs first (ms) | ${c.parseMedianMs.toFixed(1)} | |`,
    '',
    `End to end, through the gateway (its own process, info logs) to a fake provider with a 128k-token window`,
    `(512 KB) whose summarizer takes ${summaryDelay} ms per call; medians of ${r.endToEnd[0]?.requests ?? 0} requests after a warm-up one.`,
    `The summarizer's own time is the union of the intervals in which it was answering a call.`,
    '',
    "| request | total (ms) | summarizer's own time (ms) | gateway's share (ms) | gateway CPU (ms) |",
    '|---|---:|---:|---:|---:|',
    ...e2e,
    `| the same ${bytes(c.bodyBytes)} request accepted at once (no rescue), for reference | ${r.unrescuedMs.toFixed(0)} | | | |`,
    '',
    `Gateway peak RSS over these runs: ${bytes(r.gatewayPeakRssBytes)}.`,
    '',
  ].join('\n');
}

function rescueLoadTable(result: BenchResult, verdicts: Verdict[]): string {
  const r = result.rescueLoad!;
  const o = result.options.rescueLoad!;
  const p99 = r.smallP99RescuingMs / r.smallP99QuietMs;
  verdicts.push({ target: `rescue under load: small requests' p99 during rescues ≤ 2x without (${p99.toFixed(2)}x)`, met: p99 <= 2 });
  return [
    '### Rescues under load',
    '',
    `Small requests at ${o.smallRate} a second (16 connections, open loop) for ${o.seconds} s, alone and, in alternate phases, beside`,
    `agents' conversations of ${bytes(r.rescueBytes)} overflowing a 128k-token window (512 KB) one every ${o.everyMs} ms at most, each its own`,
    `conversation, refused, summarised (masking off; ${o.summaryDelayMs} ms a summarizer call) and replayed; ${o.rounds} rounds of each, medians; the gateway as \`npm start\` runs it.`,
    '',
    '| measure | value |',
    '|---|---:|',
    `| small requests' p50 without rescues / during rescues (ms) | ${r.smallP50QuietMs.toFixed(2)} / ${r.smallP50RescuingMs.toFixed(2)} |`,
    `| small requests' p99 without rescues / during rescues (ms) | ${r.smallP99QuietMs.toFixed(2)} / ${r.smallP99RescuingMs.toFixed(2)} (${p99.toFixed(2)}x; target ≤ 2x ${p99 <= 2 ? '✓' : '✗'}) |`,
    `| rescues during the rescuing phases | ${r.rescues} |`,
    `| a rescued request end to end (ms) | ${r.rescuedTotalMs.toFixed(0)} |`,
    `| of which the summarizer's own time (ms) | ${r.summarizerMs.toFixed(0)} |`,
    `| the same size accepted at once, for reference (ms) | ${r.acceptedMs.toFixed(0)} |`,
    `| added by the rescue beyond the summarizer (ms): end to end − summarizer − accepted at once | ${(r.rescuedTotalMs - r.summarizerMs - r.acceptedMs).toFixed(0)} |`,
    `| gateway CPU per rescue (ms) | ${r.gatewayCpuPerRescueMs.toFixed(1)} |`,
    `| failed small requests | ${r.failures} |`,
    '',
  ].join('\n');
}

function medians(s: ScenarioResult, pick: (r: Run) => number): Partial<Record<Target, number>> {
  const out: Partial<Record<Target, number>> = {};
  for (const t of TARGETS) if (s.runs[t].length > 0) out[t] = median(s.runs[t].map(pick));
  return out;
}

/** Judged for the fresh gateway and the overflowed one alike (the overflowed one where it ran). */
function atLeast(values: Partial<Record<Target, number>>, ratio: number): Row['target'] {
  const worst = Math.min(values.gateway!, values.overflowed ?? Infinity);
  return { text: `≥ ${ratio}x floor`, met: worst / values.floor! >= ratio };
}

function atMost(values: Partial<Record<Target, number>>, ratio: number): Row['target'] {
  const worst = Math.max(values.gateway!, values.overflowed ?? -Infinity);
  return { text: `≤ ${ratio}x floor`, met: worst / values.floor! <= ratio };
}

function sum(runs: Run[], pick: (r: Run) => number): number {
  return runs.reduce((total, r) => total + pick(r), 0);
}

function format(value: number | undefined, digits: number): string {
  if (value === undefined || Number.isNaN(value)) return '';
  return value.toLocaleString('en', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function bytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} B`;
}

function machine(result: BenchResult): string {
  const o = result.options;
  const cpus = os.cpus();
  return [
    `- Machine: ${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, ${bytes(os.totalmem())} RAM, ${os.type()} ${os.release()}; load generator on the same machine.`,
    `- Versions: Node ${process.version}, ${['fastify', '@fastify/http-proxy', 'undici', 'pino', 'prom-client', 'autocannon'].map((p) => `${p} ${version(p)}`).join(', ')}.`,
    `- Rounds: ${o.rounds} per scenario, ${o.seconds} s per target per round, after a ${o.warmupSeconds} s unrecorded warm-up per target.`,
    `- Requests: the OpenAI SDK's headers (13, a bearer credential among them); small body ${bytes(Buffer.byteLength(smallChatBody()))} (the \`bare\` scenario: the independent harness's ${Object.keys(BARE_HEADERS).length} headers and ${bytes(Buffer.byteLength(bareChatBody()))} body, its tenant and model refused for length once on \`overflowed\`, as that harness's checks do), answer ${bytes(o.answerBytes)}; large bodies of ${bytes(o.largeBytes)}: an agent conversation (tool calls, non-ASCII text), or one user message of one string; same answer; streams of ${o.streamEvents} writes ${o.streamGapMs} ms apart.`,
    `- The gateways: \`node scripts/start.mjs\` as \`npm start\` runs it (the built \`dist/\`, configured by its environment, \`LOG_LEVEL=info\`: one line per request, to stdout, which is /dev/null), CPU time from /proc/PID/stat. \`gateway\` is fresh; \`overflowed\` first got, for the bench's credential and model, a ${bytes(o.largeBytes * 2)} one-string request refused for length that nothing could shrink (a learned limit) and a ${bytes(o.largeBytes * 2)} agent conversation refused, compacted and replayed (a remembered compaction). The fake upstream refuses bodies over ${bytes(Math.round(o.largeBytes * 1.5))} (OpenAI's context_length_exceeded), so no load request is refused. The floor: \`bench/floor.ts\`, a node:http server piping into one undici Agent. Each runs in its own process, as does the fake upstream (\`bench/upstream.ts\`); the load generators run in the parent.`,
  ].join('\n');
}

function version(pkg: string): string {
  try {
    const url = new URL(`../node_modules/${pkg}/package.json`, import.meta.url);
    return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
  } catch {
    return '?';
  }
}

function revision(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { encoding: 'utf8' }).trim() !== '';
    return `commit ${head}${dirty ? ' with uncommitted changes in src/' : ''}`;
  } catch {
    return 'an unknown revision';
  }
}
