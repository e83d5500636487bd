import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { procStats } from './dist-gateway.js';
import { runLoad } from './load.js';
import { startProcess } from './procs.js';
import { CHAT_PATH, SDK_HEADERS, agentChatBody, smallChatBody } from './requests.js';
import { median } from './stats.js';
import type { UpstreamConfig } from './upstream-config.js';

/*
 * npx tsx bench/after-small.ts [--small-seconds S] [--rounds N] [--seconds S] [--gc-log DIR]
 *
 * The full run's fresh gateway measured 1 MiB requests after minutes of small ones. Two fresh
 * gateway processes as `npm start` runs them, the same fake upstream as `npm run bench`: one
 * first serves small requests for S seconds (32 connections, as the bench's small rounds), the
 * other nothing; then interleaved rounds of 1 MiB of many messages (8 connections) against both,
 * CPU per request from /proc. With --gc-log, each gateway runs under --trace-gc and its stdout
 * (access log and GC lines) goes to DIR/<label>.log.
 */

function args(argv: string[]) {
  const o = { smallSeconds: 20, rounds: 3, seconds: 3, gcLog: '', flags: '', idle: 0 };
  for (let i = 0; i < argv.length; i += 2) {
    const v = argv[i + 1];
    if (argv[i] === '--small-seconds') o.smallSeconds = Number(v);
    else if (argv[i] === '--rounds') o.rounds = Number(v);
    else if (argv[i] === '--seconds') o.seconds = Number(v);
    else if (argv[i] === '--gc-log') o.gcLog = v;
    else if (argv[i] === '--flags') o.flags = v;
    else if (argv[i] === '--idle') o.idle = Number(v);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  return o;
}

async function startGateway(label: string, upstream: string, port: number, gcLog: string, flags: string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...(gcLog ? ['--trace-gc'] : []), ...flags, 'scripts/start.mjs'], {
    env: { ...process.env, UPSTREAM_URL: `${upstream}/v1`, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', gcLog ? 'pipe' : 'ignore', 'inherit'],
  });
  if (gcLog) child.stdout!.pipe(createWriteStream(`${gcLog}/${label}.log`));
  for (let i = 0; i < 200; i++) {
    try {
      const res = await request(`http://127.0.0.1:${port}/healthz`);
      await res.body.text();
      if (res.statusCode === 200) return child;
    } catch {
      await sleep(50);
    }
  }
  child.kill('SIGKILL');
  throw new Error(`${label} did not start`);
}

async function main(): Promise<void> {
  const o = args(process.argv.slice(2));
  const config: UpstreamConfig = { answerBytes: 800, streamEvents: 50, streamGapMs: 5, summaryDelayMs: 0, limitBytes: 1.5 * 2 ** 20 };
  const upstream = await startProcess('upstream', 'upstream.ts', config);
  // With --flags, the second gateway is started with those node flags and the small phase goes to neither.
  const labels = o.flags ? ['default', 'flags'] : ['fresh', 'after-small'];
  const gateways = new Map<string, { child: ChildProcess; url: string }>();
  try {
    for (const [i, label] of labels.entries()) {
      const port = 19_400 + i + Math.floor(Math.random() * 500) * 2;
      gateways.set(label, {
        child: await startGateway(label, upstream.origin, port, o.gcLog, label === 'flags' ? o.flags.split(' ') : []),
        url: `http://127.0.0.1:${port}${CHAT_PATH}`,
      });
    }
    const small = await runLoad({
      url: o.flags ? upstream.origin + CHAT_PATH : gateways.get('after-small')!.url,
      body: smallChatBody(),
      headers: SDK_HEADERS,
      connections: 32,
      seconds: o.smallSeconds,
    });
    process.stderr.write(`${o.flags ? 'the fake upstream directly' : 'after-small'}: ${small.responses} small requests first\n`);
    const body = agentChatBody(2 ** 20);
    const cpu: Record<string, number[]> = Object.fromEntries(labels.map((l) => [l, []]));
    for (let round = 0; round < o.rounds; round++) {
      for (const label of round % 2 === 0 ? labels : [...labels].reverse()) {
        const g = gateways.get(label)!;
        const before = procStats(g.child.pid!).cpuMs;
        const load = await runLoad({ url: g.url, body, headers: SDK_HEADERS, connections: 8, seconds: o.seconds });
        const us = ((procStats(g.child.pid!).cpuMs - before) * 1000) / load.responses;
        cpu[label].push(us);
        // The full bench leaves each gateway idle while the other targets run (6 of them, 3 s each).
        if (o.idle > 0) await sleep(o.idle * 1000);
        process.stderr.write(
          `round ${round + 1} ${label.padEnd(12)} ${load.rps.toFixed(0)} req/s ${us.toFixed(0)} us/req failures ${load.failures}\n`,
        );
      }
    }
    const ratios = cpu[labels[1]].map((c, i) => c / cpu[labels[0]][i]);
    process.stdout.write(
      `1 MiB of many messages: ${labels[0]} ${median(cpu[labels[0]]).toFixed(0)} µs, ${labels[1]} ${median(cpu[labels[1]]).toFixed(0)} µs; ` +
        `ratio by round ${ratios.map((r) => r.toFixed(2)).join(', ')}\n`,
    );
  } finally {
    for (const g of gateways.values()) g.child.kill('SIGTERM');
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
