import { writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildDist } from './dist.js';
import { runLoad } from './load.js';
import { startProcess } from './procs.js';
import { agentChatBody, CHAT_PATH, SDK_HEADERS, smallChatBody } from './requests.js';

/*
 * npm run bench:profile [-- small|large] [-- --floor | --hold | --hold-fastify | --hold-features] [-- --out FILE.cpuprofile]
 * CPU profile of the gateway process alone (or the floor's, or the rescue's floor's, hold-floor.ts,
 * bare or on fastify) under a fixed request rate, against the fake upstream in its own process:
 * the top functions by self time, in microseconds per request. A fixed rate keeps the work per
 * second the same from run to run, so two builds' profiles compare even on a loaded machine (the
 * absolute figures move; the shares much less).
 */

const SCENARIOS = {
  small: { body: () => smallChatBody(), connections: 16, rate: 2000, seconds: 12 },
  large: { body: () => agentChatBody(1024 * 1024), connections: 4, rate: 120, seconds: 12 },
};
const TOP = 30;

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

async function main(argv: string[]): Promise<void> {
  const name = (argv.find((a) => Object.hasOwn(SCENARIOS, a)) ?? 'small') as keyof typeof SCENARIOS;
  const floor = argv.includes('--floor');
  const hold = ['--hold', '--hold-fastify', '--hold-features'].some((flag) => argv.includes(flag));
  const scenario = SCENARIOS[name];
  const outIndex = argv.indexOf('--out');
  const out = outIndex >= 0 ? argv[outIndex + 1] : undefined;
  buildDist();
  const upstream = await startProcess('upstream', 'upstream.ts', { answerBytes: 800, streamEvents: 50, streamGapMs: 5, summaryDelayMs: 0 });
  const proxy = floor
    ? await startProcess('floor', 'floor.ts', { upstream: upstream.origin })
    : hold
      ? await startProcess('hold', 'hold-floor.ts', {
          upstream: upstream.origin,
          fastify: argv.includes('--hold-fastify'),
          features: argv.includes('--hold-features'),
        })
      : await startProcess('gateway', 'gateway.ts', { upstream: { url: `${upstream.origin}/v1` }, log: { level: 'info' } });
  try {
    const body = scenario.body();
    const common = { url: `${proxy.origin}${CHAT_PATH}`, body, headers: SDK_HEADERS, connections: scenario.connections };
    await runLoad({ ...common, seconds: 3, rate: scenario.rate });
    const before = await proxy.stats();
    await proxy.profile('start');
    const load = await runLoad({ ...common, seconds: scenario.seconds, rate: scenario.rate });
    const profile = (await proxy.profile('stop')) as Profile;
    const after = await proxy.stats();
    process.stdout.write(
      `${floor ? 'floor' : hold ? 'hold floor' : 'gateway'} ${name}: ${load.responses} requests, ${load.rps.toFixed(0)} req/s, failures ${load.failures}, ` +
        `cpu ${(((after.cpuMs - before.cpuMs) * 1000) / load.responses).toFixed(0)} us/req (profiler on)\n`,
    );
    process.stdout.write(summarize(profile, load.responses));
    if (out) writeFileSync(out, JSON.stringify(profile));
  } finally {
    await proxy.stop();
    await upstream.stop();
  }
}

/** Self time by function (name, file, line), largest first, per request. */
function summarize(profile: Profile, requests: number): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++)
    self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + profile.timeDeltas[i]);
  const root = fileURLToPath(new URL('../', import.meta.url));
  const totals = new Map<string, number>();
  let all = 0;
  let idle = 0;
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame;
    if (frame.functionName === '(idle)' || frame.functionName === '(program)') {
      if (frame.functionName === '(idle)') idle += us;
      continue;
    }
    all += us;
    const file = frame.url.startsWith('file://') ? relative(root, fileURLToPath(frame.url)) : frame.url;
    const key = `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`;
    totals.set(key, (totals.get(key) ?? 0) + us);
  }
  const rows = [...totals].sort((a, b) => b[1] - a[1]).slice(0, TOP);
  const lines = [
    `busy (sampled, without idle and (program)): ${(all / requests).toFixed(1)} us/req; idle ${(idle / 1e6).toFixed(1)} s`,
    'self time:',
  ];
  for (const [key, us] of rows)
    lines.push(`${(us / requests).toFixed(2).padStart(8)} us  ${((100 * us) / all).toFixed(1).padStart(5)}%  ${key}`);
  lines.push("total time (self + callees) of the gateway's own functions (dist/):");
  for (const [key, us] of ownTotals(profile, self, root))
    lines.push(`${(us / requests).toFixed(2).padStart(8)} us  ${((100 * us) / all).toFixed(1).padStart(5)}%  ${key}`);
  return `${lines.join('\n')}\n`;
}

/** Each dist/ function's time including what it called, counted once per stack (recursion). */
function ownTotals(profile: Profile, self: Map<number, number>, root: string): Array<[string, number]> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const totals = new Map<string, number>();
  const walk = (id: number, open: Set<string>): number => {
    const node = byId.get(id)!;
    let us = self.get(id) ?? 0;
    const frame = node.callFrame;
    const own = frame.url.includes('/dist/')
      ? `${frame.functionName || '(anonymous)'} ${relative(root, fileURLToPath(frame.url))}:${frame.lineNumber + 1}`
      : null;
    const fresh = own !== null && !open.has(own);
    if (fresh) open.add(own);
    for (const child of node.children ?? []) us += walk(child, open);
    if (fresh) {
      open.delete(own);
      totals.set(own, (totals.get(own) ?? 0) + us);
    }
    return us;
  };
  walk(profile.nodes[0].id, new Set());
  return [...totals].sort((a, b) => b[1] - a[1]).slice(0, TOP);
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`profile: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
