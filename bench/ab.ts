import { spawn, type ChildProcess } from 'node:child_process';
import { runLoad } from './load.js';
import { startProcess } from './procs.js';
import { CHAT_PATH, SDK_HEADERS, agentChatBody, smallChatBody } from './requests.js';
import { Samples } from './stats.js';

/*
 * npm run bench:ab -- TREE_A TREE_B [TREE_C ...] [floor] [hold] [hold-fastify] [hold-features]
 *   [hold-fastify-features] [small|large] [--rounds N] [--seconds S] [--rate R] [--devnull] [--together]
 * Builds of the gateway side by side (each tree's bench/gateway.ts over its own dist/), and the
 * floor when asked (and the rescue's floors of hold-floor.ts: `hold`, `hold-fastify`,
 * `hold-features`, `hold-fastify-features`), same fake upstream, the same fixed request rate, interleaved rounds: the CPU
 * time each process spends per request and the requests it answered a second, medians over the
 * rounds, and each one's ratio to A taken round by round (the host's speed drifts from minute to minute; within one round it moves less,
 * so the paired ratio is the steadier figure). Each gateway's stdout is a pipe that this process
 * reads, as a container runtime or a log shipper would. For measuring one change against the
 * build before it; `npm run bench` compares the gateway with the floor. --devnull writes the
 * gateways' log lines to /dev/null instead, as `npm run bench` does.
 */

const SCENARIOS = {
  small: { body: () => smallChatBody(), connections: 16, rate: 1500, seconds: 6 },
  large: { body: () => agentChatBody(1024 * 1024), connections: 4, rate: 60, seconds: 8 },
};

interface Gateway {
  name: string;
  origin: string;
  cpuMs(): Promise<number>;
  stop(): void | Promise<void>;
}

function startGateway(name: string, tree: string, upstream: string, stdout: 'pipe' | 'ignore'): Promise<Gateway> {
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', `${tree}/bench/gateway.ts`, JSON.stringify({ upstream: { url: `${upstream}/v1` }, log: { level: 'info' } })],
    {
      cwd: tree,
      stdio: ['ignore', stdout, 'inherit', 'ipc'],
    },
  );
  child.stdout?.resume();
  let id = 1_000;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start`)), 20_000);
    child.on('message', (m: any) => {
      if (m?.type !== 'ready') return;
      clearTimeout(timer);
      resolve({
        name,
        origin: `http://127.0.0.1:${m.port}`,
        cpuMs: () =>
          new Promise((res) => {
            const ask = id++;
            const on = (s: any) => {
              if (s?.type === 'stats' && s.id === ask) {
                child.off('message', on);
                res(s.stats.cpuMs);
              }
            };
            child.on('message', on);
            child.send({ type: 'stats', id: ask });
          }),
        stop: () => {
          child.kill();
        },
      });
    });
  });
}

async function main(argv: string[]): Promise<void> {
  const trees = argv.filter((a) => a.startsWith('/'));
  const name = (argv.find((a) => a in SCENARIOS) ?? 'small') as keyof typeof SCENARIOS;
  const roundsAt = argv.indexOf('--rounds');
  const rounds = roundsAt >= 0 ? Number(argv[roundsAt + 1]) : 6;
  const secondsAt = argv.indexOf('--seconds');
  const rateAt = argv.indexOf('--rate');
  const scenario = {
    ...SCENARIOS[name],
    ...(secondsAt >= 0 ? { seconds: Number(argv[secondsAt + 1]) } : {}),
    // --rate 0: as fast as answers come, on 32 connections, as `npm run bench` runs small requests.
    ...(rateAt >= 0
      ? { rate: Number(argv[rateAt + 1]) || undefined, connections: Number(argv[rateAt + 1]) ? SCENARIOS[name].connections : 32 }
      : {}),
  };
  const withFloor = argv.includes('floor');
  const holds = (['hold', 'hold-fastify', 'hold-features', 'hold-fastify-features'] as const).filter((h) => argv.includes(h));
  const together = argv.includes('--together');
  if (
    trees.length < (withFloor || holds.length > 0 ? 1 : 2) ||
    !(rounds > 0 && rounds <= 50) ||
    !(scenario.seconds > 0 && scenario.seconds <= 30)
  ) {
    throw new Error(
      'usage: npm run bench:ab -- /TREE_A /TREE_B [/TREE_C ...] [floor] [hold] [hold-fastify] [hold-features] [hold-fastify-features] [small|large] [--rounds N (1-50)] [--seconds S (1-30)] [--rate R (0: closed loop)] [--devnull] [--together]',
    );
  }
  const upstream = await startProcess('upstream', 'upstream.ts', { answerBytes: 800, streamEvents: 50, streamGapMs: 5, summaryDelayMs: 0 });
  const gateways: Gateway[] = [];
  for (const [i, tree] of trees.entries())
    gateways.push(await startGateway(String.fromCharCode(65 + i), tree, upstream.origin, argv.includes('--devnull') ? 'ignore' : 'pipe'));
  if (withFloor) {
    const floor = await startProcess('floor', 'floor.ts', { upstream: upstream.origin });
    gateways.push({ name: 'floor', origin: floor.origin, cpuMs: async () => (await floor.stats()).cpuMs, stop: () => floor.stop() });
  }
  for (const name of holds) {
    const hold = await startProcess(name, 'hold-floor.ts', {
      upstream: upstream.origin,
      fastify: name.includes('fastify'),
      features: name.includes('features'),
    });
    gateways.push({ name, origin: hold.origin, cpuMs: async () => (await hold.stats()).cpuMs, stop: () => hold.stop() });
  }
  const perRequest = new Map(gateways.map((g) => [g.name, new Samples()]));
  const perSecond = new Map(gateways.map((g) => [g.name, new Samples()]));
  const toA = new Map(gateways.map((g) => [g.name, new Samples()]));
  const body = scenario.body();
  try {
    for (const g of gateways)
      await runLoad({
        url: `${g.origin}${CHAT_PATH}`,
        body,
        headers: SDK_HEADERS,
        connections: scenario.connections,
        seconds: 2,
        rate: scenario.rate,
      });
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? gateways : [...gateways].reverse();
      const used = new Map<string, number>();
      const measure = async (g: Gateway) => {
        const before = await g.cpuMs();
        const load = await runLoad({
          url: `${g.origin}${CHAT_PATH}`,
          body,
          headers: SDK_HEADERS,
          connections: scenario.connections,
          seconds: scenario.seconds,
          rate: scenario.rate,
        });
        const us = (((await g.cpuMs()) - before) * 1000) / load.responses;
        if (load.failures > 0) throw new Error(`${g.name}: ${load.failures} failures`);
        used.set(g.name, us);
        perRequest.get(g.name)!.push(us);
        perSecond.get(g.name)!.push(load.rps);
        process.stdout.write(`round ${round + 1} ${g.name}: ${us.toFixed(1)} us/req, ${load.rps.toFixed(0)} req/s\n`);
      };
      // --together: every target under its own load at the same time, so that the host's drift
      // falls on all of them alike (a fixed rate each; they share the machine evenly).
      if (together) await Promise.all(order.map(measure));
      else for (const g of order) await measure(g);
      for (const g of gateways) toA.get(g.name)!.push(used.get(g.name)! / used.get('A')!);
    }
    for (const g of gateways) {
      const samples = toA.get(g.name)!;
      const ratio =
        g.name === 'A'
          ? ''
          : `; ${g.name}/A per round: median ${samples.percentile(50).toFixed(3)} (${samples.percentile(0).toFixed(3)} to ${samples.percentile(100).toFixed(3)})`;
      const rps = perSecond.get(g.name)!.percentile(50).toFixed(0);
      process.stdout.write(
        `${name} ${g.name}: ${perRequest.get(g.name)!.percentile(50).toFixed(1)} us/req, ${rps} req/s (medians of ${rounds})${ratio}\n`,
      );
    }
  } finally {
    for (const g of gateways) await g.stop();
    await upstream.stop();
  }
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`ab: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
