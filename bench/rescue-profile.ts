import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { measureRescueLoad } from './rescue-load.js';

/*
 * npx tsx bench/rescue-profile.ts [--dir DIR] [--rounds N] [--seconds S]
 *
 * Rescues under load (bench/rescue-load.ts) with the gateway under `node --cpu-prof`, then what
 * held its event loop: the stretches in which the profiler sampled no idle time, the longest ones,
 * and the functions whose own time fills the stretches over 5 ms. A stretch is one task only on a
 * quiet machine: at 500 small requests a second, or with the process waiting for a core, several
 * tasks run back to back, and a sample taken while it waits lands where it was preempted (often a
 * socket write that woke the reader). So the event loop's delay is also sampled (every 500 ms, by
 * bench/event-loop-delay.mjs) in the gateway and in an idle node process beside it, the control:
 * what the control sees is the machine's; what the gateway sees beyond it, the gateway's.
 */

const DELAY = fileURLToPath(new URL('event-loop-delay.mjs', import.meta.url));

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

function args(argv: string[]) {
  const o = { dir: '/tmp/rescue-profile', rounds: 2, seconds: 6 };
  for (let i = 0; i < argv.length; i += 2) {
    if (argv[i] === '--dir') o.dir = resolve(argv[i + 1]);
    else if (argv[i] === '--rounds') o.rounds = Number(argv[i + 1]);
    else if (argv[i] === '--seconds') o.seconds = Number(argv[i + 1]);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  return o;
}

const LONG_MS = 5;

function longTasks(profile: Profile): { tasks: number[]; selfInLong: Map<string, number> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const name = (n: Node) =>
    `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber + 1}`;
  const idle = (n: Node) => n.callFrame.functionName === '(idle)';
  const tasks: number[] = [];
  const selfInLong = new Map<string, number>();
  let run: Array<[string, number]> = [];
  let runMs = 0;
  const close = () => {
    if (runMs >= LONG_MS) for (const [fn, ms] of run) selfInLong.set(fn, (selfInLong.get(fn) ?? 0) + ms);
    if (runMs > 0) tasks.push(runMs);
    run = [];
    runMs = 0;
  };
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i])!;
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    if (idle(node)) close();
    else {
      run.push([name(node), ms]);
      runMs += ms;
    }
  }
  close();
  return { tasks: tasks.sort((a, b) => b - a), selfInLong };
}

/** The gateway's and the control's event-loop delay, window by window (500 ms), by phase. */
function delaysByPhase(dir: string, phases: Array<[number, string]>): void {
  const read = (name: string) =>
    readFileSync(join(dir, `${name}.delay`), 'utf8')
      .trim()
      .split('\n')
      .map((line) => line.split(' ').map(Number));
  const control = read('control');
  const phaseAt = (t: number) => phases.filter(([at]) => at <= t).at(-1)?.[1];
  const by = new Map<string, { gateway: number[]; control: number[] }>();
  for (const [t, , , max] of read('gateway')) {
    const phase = phaseAt(t - 250);
    const beside = control.reduce((a, b) => (Math.abs(b[0] - t) < Math.abs(a[0] - t) ? b : a));
    if (!phase || phase === 'end') continue;
    const entry = by.get(phase) ?? { gateway: [], control: [] };
    entry.gateway.push(max);
    entry.control.push(beside[3]);
    by.set(phase, entry);
  }
  const at = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * q))];
  for (const [phase, { gateway, control: c }] of by) {
    process.stdout.write(
      `${phase}: ${gateway.length} windows of 500 ms; the longest delay in a window, median / 90th percentile / most: ` +
        `gateway ${at(gateway, 0.5).toFixed(1)} / ${at(gateway, 0.9).toFixed(1)} / ${Math.max(...gateway).toFixed(1)} ms, ` +
        `control ${at(c, 0.5).toFixed(1)} / ${at(c, 0.9).toFixed(1)} / ${Math.max(...c).toFixed(1)} ms\n`,
    );
  }
}

async function main(): Promise<void> {
  const o = args(process.argv.slice(2));
  mkdirSync(o.dir, { recursive: true });
  for (const f of readdirSync(o.dir)) if (f.endsWith('.delay')) rmSync(join(o.dir, f));
  const control = spawn(process.execPath, ['--import', DELAY, '-e', 'setTimeout(() => {}, 3_600_000)'], {
    env: { ...process.env, ELD_FILE: join(o.dir, 'control.delay') },
    stdio: 'ignore',
  });
  const phases: Array<[number, string]> = [];
  process.env.ELD_FILE = join(o.dir, 'gateway.delay');
  const result = await measureRescueLoad({
    phase: (name) => phases.push([Date.now(), name]),
    rounds: o.rounds,
    seconds: o.seconds,
    smallRate: 500,
    everyMs: 500,
    summaryDelayMs: 100,
    gatewayFlags: ['--cpu-prof', `--cpu-prof-dir=${o.dir}`, '--import', DELAY],
    log: (line) => process.stderr.write(`${line}\n`),
  });
  phases.push([Date.now(), 'end']);
  control.kill();
  process.stdout.write(`${JSON.stringify(result)}\n`);
  delaysByPhase(o.dir, phases);
  const file = readdirSync(o.dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort()
    .at(-1)!;
  const { tasks, selfInLong } = longTasks(JSON.parse(readFileSync(join(o.dir, file), 'utf8')) as Profile);
  const total = [...selfInLong.values()].reduce((a, b) => a + b, 0);
  process.stdout.write(
    `${file}: ${tasks.length} tasks, longest ${tasks
      .slice(0, 15)
      .map((t) => t.toFixed(1))
      .join(', ')} ms\n`,
  );
  process.stdout.write(
    `${tasks.filter((t) => t >= LONG_MS).length} tasks over ${LONG_MS} ms, ${total.toFixed(0)} ms in them; their own time by function:\n`,
  );
  for (const [fn, ms] of [...selfInLong].sort((a, b) => b[1] - a[1]).slice(0, 25))
    process.stdout.write(`  ${ms.toFixed(1).padStart(8)} ms  ${fn}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
