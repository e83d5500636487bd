/**
 * Load and soak: mixed traffic through a real gateway process for a bounded time, on loopback.
 *
 *   npm run soak -- [--duration 60] [--concurrency 96] [--max-requests 0] [--phases 3] [--warmup 300] [--memory] [--json]
 *
 * The gateway runs in a child process (built from src/ through tsx, with --expose-gc so its heap
 * can be measured after a full collection); this process plays the clients and a scripted
 * OpenAI-like upstream that rejects bodies over 60 KB as overlong (so ~10% of requests are
 * rescued) and also answers as the summarizer. Some clients abort mid-stream or before the
 * headers. At the end: requests done, errors by kind (expected and unexpected), latency
 * percentiles, and the gateway's RSS, heap and open handles at rest before and after the load.
 * Exits 1 if anything unexpected happened or the gateway did not return to its starting level.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Agent, request } from 'undici';

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
  options: Omit<SoakOptions, 'log'>;
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
const HEAP_SLACK_BYTES = 4 * 1024 * 1024;
const HEAP_SLACK_SHARE = 0.1;

// ---------------------------------------------------------------------------------------------
// The gateway child

interface ChildStats extends ResourceSnapshot {
  cpuMicros: number;
  log: Record<string, number>;
  errorSamples: string[];
}

async function gatewayChild(upstreamUrl: string, memory: boolean): Promise<void> {
  const { validateConfig } = await import('../src/config/load.js');
  const { buildServer } = await import('../src/server.js');
  const levels: Record<string, number> = {};
  const errorSamples: string[] = [];
  const logStream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) {
        if (!line) continue;
        const level = Number(/"level":(\d+)/.exec(line)?.[1] ?? 0);
        const name = level >= 50 ? 'error' : level >= 40 ? 'warn' : 'info';
        levels[name] = (levels[name] ?? 0) + 1;
        if (level >= 50 && errorSamples.length < 5) errorSamples.push(line.slice(0, 500));
      }
      done();
    },
  });
  const config = validateConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: upstreamUrl, firstByteTimeoutMs: 30_000, idleTimeoutMs: 30_000 },
    summarizer: { maxInputTokens: 500_000, timeoutMs: 10_000 },
    log: { level: 'info' },
    memory: { enabled: memory },
  });
  const app = buildServer(config, { logStream });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const gc = (globalThis as { gc?: () => void }).gc;
  process.on('message', async (message: { type: string }) => {
    if (message.type === 'stats') {
      for (let i = 0; i < 3; i++) {
        gc?.();
        await new Promise((r) => setImmediate(r));
      }
      const stats: ChildStats = { ...snapshot(), cpuMicros: cpuMicros(), log: { ...levels }, errorSamples };
      process.send!({ type: 'stats', stats });
    } else if (message.type === 'sample') {
      process.send!({ type: 'sample', stats: { ...snapshot(), cpuMicros: cpuMicros(), log: {}, errorSamples: [] } });
    } else if (message.type === 'stop') {
      await app.close();
      process.exit(0);
    }
  });
  process.send!({ type: 'ready', port: (app.server.address() as AddressInfo).port });
}

function snapshot(): ResourceSnapshot {
  const m = process.memoryUsage();
  const handles: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) handles[type] = (handles[type] ?? 0) + 1;
  return { rssBytes: m.rss, heapUsedBytes: m.heapUsed, heapTotalBytes: m.heapTotal, externalBytes: m.external, handles };
}

function cpuMicros(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

class GatewayProcess {
  private constructor(
    private readonly child: ChildProcess,
    readonly origin: string,
  ) {}

  static async start(upstreamUrl: string, memory: boolean): Promise<GatewayProcess> {
    const script = fileURLToPath(import.meta.url);
    const args = ['--expose-gc', '--import', 'tsx', script, '--gateway-child', upstreamUrl, memory ? 'memory' : 'no-memory'];
    const child = spawn(process.execPath, args, {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      cwd: fileURLToPath(new URL('..', import.meta.url)),
    });
    const port = await new Promise<number>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`gateway child exited early (${code})`)));
      child.on('message', (m: { type: string; port?: number }) => {
        if (m.type === 'ready') resolve(m.port!);
      });
    });
    child.removeAllListeners('exit');
    return new GatewayProcess(child, `http://127.0.0.1:${port}`);
  }

  /** Resources after full garbage collections (`sample` skips the collections). */
  stats(type: 'stats' | 'sample' = 'stats'): Promise<ChildStats> {
    return new Promise((resolve) => {
      const onMessage = (m: { type: string; stats: ChildStats }) => {
        if (m.type !== type) return;
        this.child.off('message', onMessage);
        resolve(m.stats);
      };
      this.child.on('message', onMessage);
      this.child.send({ type });
    });
  }

  async stop(): Promise<void> {
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.send({ type: 'stop' });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------
// The scripted upstream (and summarizer)

interface Upstream {
  url: string;
  unfinished(): number;
  close(): Promise<void>;
}

async function startUpstream(): Promise<Upstream> {
  let open = 0;
  const server: Server = createServer(async (req, res) => {
    open++;
    res.once('close', () => open--);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    await answer(req, res, Buffer.concat(chunks)).catch(() => res.destroy());
  });
  // Idle keep-alive connections close soon, so the gateway's sockets settle quickly at rest.
  server.keepAliveTimeout = 500;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    unfinished: () => open,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function answer(req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> {
  if (req.url === '/v1/models') return sendJson(res, 200, { object: 'list', data: [{ id: 'soak-model', object: 'model' }] });
  if (req.headers['x-gateway-compaction'] === 'summarizer') {
    await sleep(5 + Math.random() * 15);
    return sendJson(res, 200, completion('SUMMARY: the user and the agent are fixing a failing build; tests now pass.'));
  }
  if (body.length > LIMIT_BYTES) {
    return sendJson(res, 400, {
      error: {
        message: `This model's maximum context length is ${LIMIT_BYTES / 4} tokens. However, your messages resulted in ${Math.ceil(body.length / 4)} tokens. Please reduce the length of the messages.`,
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    });
  }
  if (req.headers['x-soak-stall']) {
    // Hold the request until the gateway gives up on it (its client went away).
    await new Promise<void>((r) => res.once('close', r));
    return;
  }
  let json: { stream?: boolean };
  try {
    json = JSON.parse(body.toString('utf8')) as { stream?: boolean };
  } catch {
    // What OpenAI answers: the gateway relays it, having never parsed the body itself.
    return sendJson(res, 400, { error: { message: BAD_JSON, type: 'invalid_request_error', param: null, code: null } });
  }
  if (json.stream) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (const event of streamEvents(8)) {
      if (res.destroyed) return;
      res.write(event);
      await sleep(3);
    }
    res.end();
    return;
  }
  await sleep(5 + Math.random() * 10);
  sendJson(res, 200, completion('a short answer'));
}

const BAD_JSON = 'We could not parse the JSON body of your request.';

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function completion(content: string) {
  return {
    id: 'chatcmpl-soak',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'soak-model',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 },
  };
}

function streamEvents(n: number): string[] {
  const base = { id: 'chatcmpl-soak', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'soak-model' };
  const events = Array.from({ length: n }, (_, i) => ({ ...base, choices: [{ index: 0, delta: { content: `tok${i} ` }, finish_reason: null }] }));
  events.push({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' } as never] });
  return [...events.map((e) => `data: ${JSON.stringify(e)}\n\n`), 'data: [DONE]\n\n'];
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

const SMALL = { model: 'soak-model', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello.' }] };

/** An agent-like history of ~100 KB: over the upstream's 60 KB, so it is rescued. */
function agentHistory(seed: number) {
  const messages: Array<Record<string, unknown>> = [{ role: 'system', content: 'You are a coding agent. Use the tools.' }];
  for (let turn = 0; turn < 40; turn++) {
    messages.push({ role: 'user', content: `Step ${turn} (${seed}): look at file ${turn}.` });
    const id = `call_${seed}_${turn}`;
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'read_file', arguments: `{"path":"src/f${turn}.ts"}` } }] });
    messages.push({ role: 'tool', tool_call_id: id, content: `// file ${turn}\n${'export const value = 42; // padding line\n'.repeat(55)}` });
  }
  messages.push({ role: 'user', content: 'Now fix the failing test.' });
  return { model: 'soak-model', messages, max_tokens: 500 };
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
    request(`${origin}/v1/chat/completions`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-soak', ...headers },
      body,
      signal,
    });
  try {
    switch (kind) {
      case 'chat': {
        const res = await post(JSON.stringify(SMALL));
        const text = await res.body.text();
        return res.statusCode === 200 && text.includes('"choices"') ? done('ok') : done(`unexpected:status_${res.statusCode}`, text.slice(0, 200));
      }
      case 'stream':
      case 'rescue_stream':
      case 'rescue': {
        const body = kind === 'stream' ? { ...SMALL, stream: true } : { ...agentHistory(seq), stream: kind === 'rescue_stream' };
        const res = await post(JSON.stringify(body));
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
        const res = await post(JSON.stringify({ ...SMALL, stream: true }), {}, abort.signal);
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
          const res = await post(JSON.stringify(SMALL), { 'x-soak-stall': '1' }, abort.signal);
          await res.body.text();
          return done(`unexpected:answered_${res.statusCode}`);
        } catch (err) {
          return abort.signal.aborted ? done('client_aborted_before_headers') : done('unexpected:network', String(err));
        } finally {
          clearTimeout(timer);
        }
      }
      case 'bad_json': {
        const res = await post('{"model": "soak-model", "messages": [');
        const text = await res.body.text();
        return res.statusCode === 400 && text.includes(BAD_JSON) ? done('invalid_json') : done(`unexpected:status_${res.statusCode}`, text.slice(0, 200));
      }
      case 'models': {
        const res = await request(`${origin}/v1/models`, { dispatcher: agent, headers: { authorization: 'Bearer sk-soak' } });
        const text = await res.body.text();
        return res.statusCode === 200 && text.includes('soak-model') ? done('ok') : done(`unexpected:status_${res.statusCode}`);
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

/** Waits until the gateway's open handles stop changing (kept-alive sockets closing), then measures. */
async function atRest(gateway: GatewayProcess): Promise<ChildStats> {
  let last = '';
  let stats = await gateway.stats('sample');
  for (let i = 0; i < 40; i++) {
    await sleep(250);
    stats = await gateway.stats('sample');
    const now = JSON.stringify(stats.handles);
    if (now === last && !stats.handles.TCPSocketWrap) break;
    last = now;
  }
  return gateway.stats('stats');
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const log = options.log ?? (() => undefined);
  const upstream = await startUpstream();
  const gateway = await GatewayProcess.start(upstream.url, options.memory ?? false);
  try {
    log(`gateway at ${gateway.origin}; warming up with ${options.warmupRequests} requests`);
    await drive(gateway.origin, options.concurrency, Number.POSITIVE_INFINITY, options.warmupRequests, () => undefined);
    const start = await atRest(gateway);
    log(`at rest: heap ${mb(start.heapUsedBytes)}, rss ${mb(start.rssBytes)}, handles ${JSON.stringify(start.handles)}`);

    const outcomes: Outcome[] = [];
    const restHeap = [start.heapUsedBytes];
    let peakRss = start.rssBytes;
    let elapsedMs = 0;
    let gatewayCpuMicros = 0;
    let parentCpuMicros = 0;
    let end = start;
    // The load comes in phases with a rest between them: a leak shows as a heap that keeps
    // climbing from rest to rest, a cache or warm-up as one that levels off.
    for (let phase = 0; phase < options.phases; phase++) {
      const before = await gateway.stats('sample');
      const parentCpu = process.cpuUsage();
      const begun = performance.now();
      let ticks = 0;
      const sampler = setInterval(async () => {
        const s = await gateway.stats('sample');
        peakRss = Math.max(peakRss, s.rssBytes);
        if (++ticks % 5 !== 0) return;
        log(`${Math.round((elapsedMs + performance.now() - begun) / 1000)} s: ${outcomes.length} requests, gateway heap ${mb(s.heapUsedBytes)}, rss ${mb(s.rssBytes)}`);
      }, 1_000);
      const left = options.maxRequests === 0 ? 0 : Math.max(1, options.maxRequests - outcomes.length);
      await drive(gateway.origin, options.concurrency, begun + options.durationMs / options.phases, left, (o) => outcomes.push(o));
      clearInterval(sampler);
      elapsedMs += performance.now() - begun;
      const used = process.cpuUsage(parentCpu);
      parentCpuMicros += used.user + used.system;
      gatewayCpuMicros += (await gateway.stats('sample')).cpuMicros - before.cpuMicros;
      end = await atRest(gateway);
      restHeap.push(end.heapUsedBytes);
      log(`at rest after phase ${phase + 1}/${options.phases}: heap ${mb(end.heapUsedBytes)}, rss ${mb(end.rssBytes)}, handles ${JSON.stringify(end.handles)}`);
      if (options.maxRequests > 0 && outcomes.length >= options.maxRequests) break;
    }
    const cpu = { gateway: gatewayCpuMicros / 1000 / elapsedMs, loadAndUpstream: parentCpuMicros / 1000 / elapsedMs };
    return report(options, outcomes, elapsedMs, start, end, restHeap, peakRss, cpu, upstream.unfinished());
  } finally {
    await gateway.stop();
    await upstream.close();
  }
}

function report(
  options: SoakOptions,
  outcomes: Outcome[],
  elapsedMs: number,
  start: ChildStats,
  end: ChildStats,
  restHeapBytes: number[],
  peakRssBytes: number,
  cpuCores: SoakReport['cpuCores'],
  upstreamLeftOpen: number,
): SoakReport {
  const byKind: Record<string, number> = {};
  const expected: Record<string, number> = {};
  const unexpected: Record<string, number> = {};
  const unexpectedSamples: string[] = [];
  const latencies: Record<string, number[]> = { all: [] };
  for (const o of outcomes) {
    byKind[o.kind] = (byKind[o.kind] ?? 0) + 1;
    if (o.result.startsWith('unexpected:')) {
      unexpected[o.result.slice(11)] = (unexpected[o.result.slice(11)] ?? 0) + 1;
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
    values.sort((a, b) => a - b);
    const at = (q: number) => round(values[Math.min(values.length - 1, Math.floor(q * values.length))] ?? 0);
    latencyMs[kind] = { count: values.length, p50: at(0.5), p99: at(0.99), max: round(values.at(-1) ?? 0) };
  }
  const heapLimit = start.heapUsedBytes * (1 + HEAP_SLACK_SHARE) + HEAP_SLACK_BYTES;
  const handlesBack = Object.entries(end.handles).every(([type, n]) => n <= (start.handles[type] ?? 0));
  const { log: _log, ...shown } = options;
  return {
    options: shown,
    elapsedMs: round(elapsedMs),
    requests: outcomes.length,
    byKind,
    expected,
    unexpected,
    unexpectedSamples,
    latencyMs,
    start: strip(start),
    end: strip(end),
    restHeapBytes,
    peakRssBytes,
    cpuCores: { gateway: round(cpuCores.gateway), loadAndUpstream: round(cpuCores.loadAndUpstream) },
    gatewayLog: end.log,
    gatewayErrorSamples: end.errorSamples,
    upstreamLeftOpen,
    settled: { heap: end.heapUsedBytes <= heapLimit, handles: handlesBack },
  };
}

function strip(s: ChildStats): ResourceSnapshot {
  return { rssBytes: s.rssBytes, heapUsedBytes: s.heapUsedBytes, heapTotalBytes: s.heapTotalBytes, externalBytes: s.externalBytes, handles: s.handles };
}

const round = (n: number) => Math.round(n * 100) / 100;
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

export function formatReport(r: SoakReport): string {
  const unexpectedTotal = Object.values(r.unexpected).reduce((a, b) => a + b, 0);
  const lines = [
    `soak: ${r.requests} requests in ${(r.elapsedMs / 1000).toFixed(1)} s (${Math.round(r.requests / (r.elapsedMs / 1000))}/s), concurrency ${r.options.concurrency}, compaction memory ${r.options.memory ? 'on' : 'off'}`,
    `  mix: ${Object.entries(r.byKind).map(([k, n]) => `${k} ${n}`).join(', ')}`,
    `  expected errors: ${Object.entries(r.expected).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`,
    `  unexpected errors: ${unexpectedTotal}${unexpectedTotal ? ` (${Object.entries(r.unexpected).map(([k, n]) => `${k} ${n}`).join(', ')})` : ''}`,
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
  if (process.argv[2] === '--gateway-child') return gatewayChild(process.argv[3], process.argv[4] === 'memory');
  const options: SoakOptions = {
    durationMs: Math.min(arg('duration', 60), 3_600) * 1000,
    concurrency: Math.max(1, Math.min(arg('concurrency', 96), 1_000)),
    maxRequests: arg('max-requests', 0),
    warmupRequests: arg('warmup', 300),
    phases: Math.max(1, Math.min(arg('phases', 3), 20)),
    memory: process.argv.includes('--memory'),
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
