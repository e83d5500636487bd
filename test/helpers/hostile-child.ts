import { readFileSync } from 'node:fs';
import { Agent as HttpAgent, get } from 'node:http';
import { Agent, request } from 'undici';
import { listening, runGateway, type Exit, type Proc } from './process.js';

/*
 * The built gateway (dist/main.js) in a child process under a V8 heap limit, the way it runs in a
 * container, with what a test of hostile load reads off it: whether it is still alive, its peak
 * RSS, and how long its /healthz takes to answer while it works.
 */

export interface HostileGateway {
  proc: Proc;
  origin: string;
  /** The exit, once the process has ended (a crash), else undefined. */
  exit(): Exit | undefined;
  /** The process's peak resident set so far (VmHWM), in MiB; 0 once it has exited. */
  peakRssMb(): number;
  /** The lines the process printed that are not JSON log lines (a V8 crash report, for one), last ones. */
  crashText(): string;
  stop(): Promise<void>;
}

export async function startHostileGateway(upstreamUrl: string, heapMb: number, env: Record<string, string> = {}): Promise<HostileGateway> {
  const proc = runGateway([], { UPSTREAM_URL: upstreamUrl, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env }, [
    `--max-old-space-size=${heapMb}`,
  ]);
  let exit: Exit | undefined;
  void proc.exited.then((e) => (exit = e));
  const origin = await listening(proc);
  const pid = proc.child.pid!;
  return {
    proc,
    origin,
    exit: () => exit,
    peakRssMb: () => {
      if (exit) return 0;
      try {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        return Math.round(Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
      } catch {
        return 0;
      }
    },
    crashText: () =>
      proc
        .output()
        .split('\n')
        .filter((l) => l && !l.startsWith('{'))
        .slice(-20)
        .join('\n'),
    stop: async () => {
      if (exit) return;
      proc.child.kill('SIGTERM');
      if ((await proc.exitWithin(10_000)) === 'still running') proc.child.kill('SIGKILL');
    },
  };
}

export interface Posted {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/**
 * A client with its own connection pool, its waits bounded (a request the gateway never answers
 * fails within `timeoutMs` instead of hanging the test).
 */
export function boundedClient(timeoutMs: number) {
  const agent = new Agent({ headersTimeout: timeoutMs, bodyTimeout: timeoutMs, connections: 16 });
  return {
    async post(url: string, body: Buffer): Promise<Posted> {
      const res = await request(url, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test' },
        body,
      });
      const chunks: Buffer[] = [];
      for await (const chunk of res.body) chunks.push(chunk as Buffer);
      return { status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) };
    },
    async text(url: string): Promise<{ status: number; text: string }> {
      const res = await request(url, { dispatcher: agent });
      return { status: res.statusCode, text: await res.body.text() };
    },
    close: () => agent.close(),
  };
}

export interface PollResult {
  /** The slowest /healthz round trip, in ms. */
  worstMs: number;
  polls: number;
  /** Polls that got no 200 (an error, a timeout, another status). */
  failures: number;
}

/**
 * GETs /healthz every `everyMs` on one kept-alive connection until stopped, at most `maxPolls`
 * times; each poll waits at most `timeoutMs` (counted as a failure and at that latency).
 */
export function pollHealth(origin: string, { everyMs = 15, maxPolls = 5_000, timeoutMs = 30_000 } = {}) {
  const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
  let stopped = false;
  const result: PollResult = { worstMs: 0, polls: 0, failures: 0 };
  const once = () =>
    new Promise<boolean>((resolve) => {
      const req = get(`${origin}/healthz`, { agent, timeout: timeoutMs }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode === 200));
        res.on('error', () => resolve(false));
      });
      req.on('timeout', () => req.destroy(new Error('healthz timed out')));
      req.on('error', () => resolve(false));
    });
  const loop = (async () => {
    while (!stopped && result.polls < maxPolls) {
      const started = performance.now();
      const ok = await once();
      result.worstMs = Math.max(result.worstMs, performance.now() - started);
      result.polls++;
      if (!ok) result.failures++;
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    async stop(): Promise<PollResult> {
      stopped = true;
      await loop;
      agent.destroy();
      return { ...result, worstMs: Math.round(result.worstMs) };
    },
  };
}

/** A sample of a Prometheus text exposition, by metric name and exact label set; undefined when absent. */
export function sample(metrics: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of metrics.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.keys(got).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => got[k] === v))
      return Number(m[3]);
  }
  return undefined;
}
