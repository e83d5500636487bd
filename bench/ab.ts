import { spawn, type ChildProcess } from 'node:child_process';
import { runLoad } from './load.js';
import { startProcess } from './procs.js';
import { CHAT_PATH, SDK_HEADERS, agentChatBody, smallChatBody } from './requests.js';
import { Samples } from './stats.js';

/*
 * npm run bench:ab -- TREE_A TREE_B [small|large] [--rounds N]
 * Two builds of the gateway side by side (each tree's bench/gateway.ts over its own dist/), same
 * fake upstream, the same fixed request rate, interleaved rounds: the CPU time each process spends
 * per request, medians over the rounds. Each gateway's stdout is a pipe that this process reads,
 * as a container runtime or a log shipper would. For measuring one change against the build
 * before it; `npm run bench` compares the gateway with the floor.
 */

const SCENARIOS = {
  small: { body: () => smallChatBody(), connections: 16, rate: 1500, seconds: 6 },
  large: { body: () => agentChatBody(1024 * 1024), connections: 4, rate: 60, seconds: 8 },
};

interface Gateway {
  name: string;
  origin: string;
  cpuMs(): Promise<number>;
  stop(): void;
}

function startGateway(name: string, tree: string, upstream: string): Promise<Gateway> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', `${tree}/bench/gateway.ts`, JSON.stringify({ upstream: { url: `${upstream}/v1` }, log: { level: 'info' } })], {
    cwd: tree,
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  child.stdout!.resume();
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
        stop: () => child.kill(),
      });
    });
  });
}

async function main(argv: string[]): Promise<void> {
  const [treeA, treeB] = argv.filter((a) => a.startsWith('/'));
  const name = (argv.find((a) => a in SCENARIOS) ?? 'small') as keyof typeof SCENARIOS;
  const roundsAt = argv.indexOf('--rounds');
  const rounds = roundsAt >= 0 ? Number(argv[roundsAt + 1]) : 6;
  if (!treeA || !treeB || !(rounds > 0 && rounds <= 50)) throw new Error('usage: npm run bench:ab -- /TREE_A /TREE_B [small|large] [--rounds N (1-50)]');
  const scenario = SCENARIOS[name];
  const upstream = await startProcess('upstream', 'upstream.ts', { answerBytes: 800, streamEvents: 50, streamGapMs: 5, summaryDelayMs: 0 });
  const gateways = [await startGateway('A', treeA, upstream.origin), await startGateway('B', treeB, upstream.origin)];
  const perRequest = new Map(gateways.map((g) => [g.name, new Samples()]));
  const body = scenario.body();
  try {
    for (const g of gateways) await runLoad({ url: `${g.origin}${CHAT_PATH}`, body, headers: SDK_HEADERS, connections: scenario.connections, seconds: 2, rate: scenario.rate });
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? gateways : [...gateways].reverse();
      for (const g of order) {
        const before = await g.cpuMs();
        const load = await runLoad({ url: `${g.origin}${CHAT_PATH}`, body, headers: SDK_HEADERS, connections: scenario.connections, seconds: scenario.seconds, rate: scenario.rate });
        const used = (await g.cpuMs()) - before;
        if (load.failures > 0) throw new Error(`${g.name}: ${load.failures} failures`);
        perRequest.get(g.name)!.push((used * 1000) / load.responses);
        process.stdout.write(`round ${round + 1} ${g.name}: ${((used * 1000) / load.responses).toFixed(1)} us/req, ${load.rps.toFixed(0)} req/s\n`);
      }
    }
    const a = perRequest.get('A')!.percentile(50);
    const b = perRequest.get('B')!.percentile(50);
    process.stdout.write(`${name}: A ${a.toFixed(1)} us/req, B ${b.toFixed(1)} us/req (medians of ${rounds}); B/A ${(b / a).toFixed(3)}\n`);
  } finally {
    for (const g of gateways) g.stop();
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
