import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { runLoad } from './load.js';
import { startProcess } from './procs.js';
import { CHAT_PATH, SDK_HEADERS, agentChatBody, smallChatBody } from './requests.js';
import { median } from './stats.js';
import type { UpstreamConfig } from './upstream-config.js';
import { freePort } from '../test/helpers/ports.js';

/*
 * npx tsx bench/overflowed.ts [--dist DIR]... [--rounds N] [--seconds S] [--body small|many|string]
 *
 * The cost of a request on a gateway that has seen one refusal for length, against the same
 * request on a fresh gateway: for each dist/ given (default ./dist), two gateway processes as
 * `node dist/main.js` runs them (env config, the access log to /dev/null), one of them sent one
 * 2.5 MB request the fake upstream refuses as overlong (a tenant and model that overflowed
 * once), then interleaved rounds of the same load against every process. CPU per request is
 * each gateway process's utime + stime from /proc/PID/stat over the round, as the independent
 * harness (../shared/peer-bench) reads it. Loopback only; every load is bounded in time.
 */

const USER_HZ = 100;
/** The fake upstream refuses bodies larger than this as overlong (OpenAI's context_length_exceeded). */
const LIMIT_BYTES = 2_000_000;

interface Gateway {
  label: string;
  origin: string;
  child: ChildProcess;
}

function args(argv: string[]) {
  const dists: string[] = [];
  let rounds = 4;
  let seconds = 3;
  let body = 'small';
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i + 1];
    if (argv[i] === '--dist') dists.push(resolve(v));
    else if (argv[i] === '--rounds') rounds = Number(v);
    else if (argv[i] === '--seconds') seconds = Number(v);
    else if (argv[i] === '--body') body = v;
    else throw new Error(`unknown argument ${argv[i]}`);
    i++;
  }
  return { dists: dists.length > 0 ? dists : [resolve('dist')], rounds, seconds, body };
}

function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command's closing parenthesis.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ;
}

async function startGateway(label: string, dist: string, upstream: string): Promise<Gateway> {
  const port = await freePort();
  const child = spawn(process.execPath, [resolve(dist, 'main.js')], {
    env: { ...process.env, UPSTREAM_URL: `${upstream}/v1`, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const origin = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    try {
      const res = await request(`${origin}/healthz`);
      await res.body.text();
      if (res.statusCode === 200) return { label, origin, child };
    } catch {
      await sleep(50);
    }
  }
  child.kill('SIGKILL');
  throw new Error(`${label} did not start`);
}

/** One user message holding `bytes` of text: the shape of a pasted file, which nothing can compact. */
function oneStringBody(bytes: number): string {
  return JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: 'x'.repeat(bytes) }], max_tokens: 256 });
}

async function main(): Promise<void> {
  const { dists, rounds, seconds, body: shape } = args(process.argv.slice(2));
  const config: UpstreamConfig = { answerBytes: 800, streamEvents: 50, streamGapMs: 5, summaryDelayMs: 0, limitBytes: LIMIT_BYTES };
  const upstream = await startProcess('upstream', 'upstream.ts', config);
  const gateways: Gateway[] = [];
  try {
    for (const [i, dist] of dists.entries()) {
      gateways.push(await startGateway(`${i}:fresh`, dist, upstream.origin));
      const overflowed = await startGateway(`${i}:overflowed`, dist, upstream.origin);
      const res = await request(`${overflowed.origin}${CHAT_PATH}`, {
        method: 'POST',
        headers: SDK_HEADERS,
        body: oneStringBody(2_500_000),
      });
      const text = await res.body.text();
      process.stderr.write(
        `${dist}: the overlong request got ${res.statusCode} ${String(res.headers['x-gateway-compaction'] ?? '')} ${text.slice(0, 120)}\n`,
      );
      gateways.push(overflowed);
    }
    const body = shape === 'small' ? smallChatBody() : shape === 'many' ? agentChatBody(2 ** 20) : oneStringBody(2 ** 20);
    const connections = shape === 'small' ? 32 : 8;
    const cpu: Record<string, number[]> = Object.fromEntries(gateways.map((g) => [g.label, []]));
    const rps: Record<string, number[]> = Object.fromEntries(gateways.map((g) => [g.label, []]));
    for (const g of gateways) await runLoad({ url: `${g.origin}${CHAT_PATH}`, body, headers: SDK_HEADERS, connections, seconds: 1 });
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? gateways : [...gateways].reverse();
      for (const g of order) {
        const before = cpuMsOf(g.child.pid!);
        const load = await runLoad({ url: `${g.origin}${CHAT_PATH}`, body, headers: SDK_HEADERS, connections, seconds });
        const us = ((cpuMsOf(g.child.pid!) - before) * 1000) / load.responses;
        cpu[g.label].push(us);
        rps[g.label].push(load.rps);
        process.stderr.write(
          `round ${round + 1} ${g.label.padEnd(14)} ${load.rps.toFixed(0)} req/s ${us.toFixed(0)} us/req failures ${load.failures}\n`,
        );
      }
    }
    const lines = [`| gateway | req/s (median) | CPU µs/request (median) | rounds |`, `|---|---:|---:|---|`];
    for (const g of gateways)
      lines.push(
        `| ${dists[Number(g.label.split(':')[0])]} ${g.label.split(':')[1]} | ${median(rps[g.label]).toFixed(0)} | ${median(cpu[g.label]).toFixed(0)} | ${cpu[g.label].map((c) => c.toFixed(0)).join(', ')} |`,
      );
    for (let i = 0; i < dists.length; i++) {
      const ratios = cpu[`${i}:overflowed`].map((c, r) => c / cpu[`${i}:fresh`][r]);
      lines.push(
        `\n${dists[i]}: overflowed ÷ fresh CPU per request, paired by round: median ${median(ratios).toFixed(2)} (${ratios.map((r) => r.toFixed(2)).join(', ')})`,
      );
    }
    process.stdout.write(`${body.length} B ${shape} body\n${lines.join('\n')}\n`);
  } finally {
    for (const g of gateways) g.child.kill('SIGTERM');
    await upstream.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
