/*
 * Big rescues under a heap limit: the built gateway in a child process (`node --max-old-space-size`),
 * a loopback stand-in that refuses bodies over a size as overlong and plays the summarizer,
 * N concurrent conversations of M MB each, and a /healthz poller. Reports the child's peak RSS
 * (VmHWM), the poller's worst latency, what each client got, and the summarizer calls.
 *
 *   npx tsx bench/hostile-load.ts [--mb 20] [--n 4] [--heap 384] [--messages 2000] [--tiny] [--cpu-prof]
 *   npx tsx bench/hostile-load.ts --wide 3000000 | --strings 8000000 [--n 1] [--heap 384]
 *
 * --wide: a body whose `metadata` holds that many keys; --strings: one message whose content is
 * a list of that many short strings.
 */
import { request as httpRequest } from 'node:http';
import { readFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { agentConversationBody, manyStringsBody, tinyTurnsBody, wideObjectBody } from '../test/helpers/hostile-bodies.js';
import { startStandIn } from '../test/helpers/provider.js';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const MB = arg('mb', 20);
const N = arg('n', 4);
const HEAP = arg('heap', 384);
const MESSAGES = arg('messages', 2000);
const LIMIT_BYTES = 1_000_000;
const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

function post(origin: string, path: string, body: Buffer): Promise<{ status: number; bytes: number; header?: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${origin}${path}`,
      { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test', 'content-length': body.length } },
      (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            bytes,
            header: res.headers['x-gateway-compaction'] as string | undefined,
            ms: performance.now() - started,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function get(origin: string, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest(`${origin}${path}`, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

function peakRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024;
}

async function main() {
  const upstream = await startStandIn({ provider: 'hostile', limitBytes: LIMIT_BYTES });
  const upstreamUrl = upstream.baseUrl;
  const profile = process.argv.includes('--cpu-prof')
    ? ['--cpu-prof', '--cpu-prof-dir=/tmp/hostile-prof', ...(process.env.LAG_PRELOAD ? ['--import', process.env.LAG_PRELOAD] : [])]
    : [];
  const child = spawn(process.execPath, [`--max-old-space-size=${HEAP}`, ...profile, MAIN], {
    env: { PATH: process.env.PATH ?? '', UPSTREAM_URL: upstreamUrl, PORT: '0', LOG_LEVEL: 'info', ...extraEnv() },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  let exit: string | undefined;
  child.once('exit', (code, signal) => (exit = `exit ${code} ${signal ?? ''}`));
  const origin = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /listening at (http:\/\/[^\s"]+)/i.exec(output);
      if (m) {
        clearInterval(timer);
        resolve(m[1]);
      }
      if (exit) reject(new Error(`gateway ${exit}: ${output}`));
    }, 20);
  });
  const tiny = process.argv.includes('--tiny');
  const wide = arg('wide', 0);
  const strings = arg('strings', 0);
  const bodyOf = (i: number) => {
    if (wide) return wideObjectBody(wide, i);
    if (strings) return manyStringsBody(strings, i);
    return tiny ? tinyTurnsBody(MESSAGES, i) : agentConversationBody(MB * 1024 * 1024, MESSAGES, i);
  };
  const bodies = Array.from({ length: N }, (_, i) => bodyOf(i));
  const baseRss = peakRss(child.pid!);
  let worst = 0;
  let polls = 0;
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const started = performance.now();
      await get(origin, '/healthz');
      worst = Math.max(worst, performance.now() - started);
      polls++;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const started = performance.now();
  const results = await Promise.allSettled(bodies.map((b) => post(origin, '/v1/chat/completions', b)));
  const wall = performance.now() - started;
  polling = false;
  await poller;
  const peak = exit ? 0 : peakRss(child.pid!);
  child.kill('SIGTERM');
  await upstream.close();
  console.log(
    JSON.stringify(
      {
        n: N,
        mb: MB,
        heapMb: HEAP,
        messages: MESSAGES,
        bodyBytes: bodies[0].length,
        gateway: exit ?? 'alive',
        baseRssMb: Math.round(baseRss / 2 ** 20),
        peakRssMb: Math.round(peak / 2 ** 20),
        worstHealthzMs: Math.round(worst),
        polls,
        wallMs: Math.round(wall),
        results: results.map((r) =>
          r.status === 'fulfilled'
            ? { status: r.value.status, header: r.value.header, ms: Math.round(r.value.ms) }
            : { error: String(r.reason) },
        ),
        chatCalls: upstream.chatCalls.length,
        summarizerCalls: upstream.summarizerCalls(),
        summarizerMb: +(upstream.summarizerBytes() / 2 ** 20).toFixed(1),
        crash: exit
          ? output
              .split('\n')
              .filter((l) => !l.startsWith('{'))
              .slice(-25)
              .join('\n')
          : undefined,
        log: output
          .split('\n')
          .filter((l) => /"level":(40|50|60)/.test(l))
          .slice(0, 3)
          .map((l) => l.slice(0, 300)),
      },
      null,
      2,
    ),
  );
}

function extraEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (/^(COMPACTION|SUMMARIZER|MEMORY)_/.test(k) && v) out[k] = v;
  return out;
}

await main();
