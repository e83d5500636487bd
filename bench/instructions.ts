import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildDist } from './dist.js';
import { runLoad } from './load.js';
import { startProcess } from './procs.js';
import { CHAT_PATH, SDK_HEADERS, smallChatBody } from './requests.js';

/*
 * npm run bench:instructions [-- /TREE ...] [--requests N] [--warmup N] [--keep DIR]
 * Instructions per small request, counted by valgrind's callgrind: the floor and this tree's
 * gateway (or the gateways of the trees given, each over its own dist/), each under valgrind, the
 * fake upstream and the load outside it. Counts start after a warm-up (the JIT has settled) and
 * cover N requests. Unlike CPU time on this VM, which moves by ±15% from minute to minute, the
 * floor's count repeats (302,820 to 303,904 instructions a request in ten runs); the gateway's less
 * well (the JIT's tiering under valgrind depends on timing: a few percent, once 15%), so compare
 * builds counted in the same run, and count twice.
 * It counts user-space instructions only (no kernel time, no cache misses), so it finds and
 * measures the gateway's own work; `npm run bench` is still what says how fast it is. The main
 * thread runs the JavaScript; the other threads are V8's compiler and collector helpers and
 * libuv's pool. Needs valgrind (apt-get install valgrind); runs the targets two at a time.
 * --keep DIR leaves callgrind's files there (`callgrind_annotate --inclusive=no DIR/<file>-01`
 * lists the main thread's native functions and V8 builtins; JIT-compiled code shows as addresses).
 */

const USAGE = 'usage: npm run bench:instructions [-- /TREE ...] [--requests N (100-20000)] [--warmup N (0-50000)] [--keep DIR]';
const HARD_LIMIT_MS = 20 * 60_000;
const START_TIMEOUT_MS = 300_000;

interface Target {
  name: string;
  script: string;
  cwd: string;
}

interface Count {
  name: string;
  responses: number;
  main: number;
  all: number;
}

function option(argv: string[], name: string, fallback: number): number {
  const at = argv.indexOf(name);
  return at >= 0 ? Number(argv[at + 1]) : fallback;
}

async function main(argv: string[]): Promise<number> {
  const requests = option(argv, '--requests', 3000);
  const warmup = option(argv, '--warmup', 6000);
  const keepAt = argv.indexOf('--keep');
  const keep = keepAt >= 0 ? argv[keepAt + 1] : undefined;
  const trees = argv.filter((a, i) => a.startsWith('/') && argv[i - 1] !== '--keep');
  if (!(requests >= 100 && requests <= 20_000) || !(warmup >= 0 && warmup <= 50_000) || (keepAt >= 0 && !keep)) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (spawnSync('valgrind', ['--version']).status !== 0) {
    process.stderr.write('bench:instructions needs valgrind: apt-get install valgrind\n');
    return 2;
  }
  setTimeout(() => {
    process.stderr.write(`bench:instructions: still running after ${HARD_LIMIT_MS / 1000} s; giving up\n`);
    process.exit(1);
  }, HARD_LIMIT_MS).unref();

  const here = fileURLToPath(new URL('..', import.meta.url));
  buildDist();
  const targets: Target[] = [{ name: 'floor', script: join(here, 'bench/floor.ts'), cwd: here }];
  for (const tree of trees.length > 0 ? trees : [here])
    targets.push({ name: `gateway ${tree}`, script: join(tree, 'bench/gateway.ts'), cwd: tree });

  const upstream = await startProcess('upstream', 'upstream.ts', { answerBytes: 800, streamEvents: 50, streamGapMs: 5, summaryDelayMs: 0 });
  const dir = keep ? (mkdirSync(keep, { recursive: true }), keep) : mkdtempSync(join(tmpdir(), 'callgrind-'));
  try {
    const counts: Count[] = [];
    // Two at a time: valgrind runs a process on one core, and the machine has two.
    for (let i = 0; i < targets.length; i += 2) {
      counts.push(...(await Promise.all(targets.slice(i, i + 2).map((t) => count(t, upstream.origin, dir, warmup, requests)))));
    }
    const floor = counts[0];
    process.stdout.write(`instructions per small request (callgrind; ${requests} requests after ${warmup}):\n`);
    for (const c of counts) {
      const ratio = c === floor ? '' : `  (main ${(c.main / floor.main).toFixed(3)}x, all ${(c.all / floor.all).toFixed(3)}x the floor)`;
      process.stdout.write(
        `  ${c.name}: main thread ${Math.round(c.main).toLocaleString('en')}, all threads ${Math.round(c.all).toLocaleString('en')}${ratio}\n`,
      );
    }
    return 0;
  } finally {
    if (!keep) rmSync(dir, { recursive: true, force: true });
    await upstream.stop();
  }
}

async function count(target: Target, upstream: string, dir: string, warmup: number, requests: number): Promise<Count> {
  const config = target.name === 'floor' ? { upstream } : { upstream: { url: `${upstream}/v1` }, log: { level: 'info' } };
  const prefix = join(dir, `${target.name.replace(/\W+/g, '_')}`);
  const child: ChildProcess = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--separate-threads=yes',
      '--smc-check=all-non-file',
      `--callgrind-out-file=${prefix}.%p`,
      process.execPath,
      '--import',
      'tsx',
      target.script,
      JSON.stringify(config),
    ],
    { cwd: target.cwd, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
  );
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-3000)));
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${target.name} did not start under valgrind:\n${stderr}`)), START_TIMEOUT_MS);
      child.on('message', (m: { type?: string; port?: number }) => {
        if (m?.type !== 'ready') return;
        clearTimeout(timer);
        resolve(m.port!);
      });
      child.once('exit', (code) => reject(new Error(`${target.name} exited (${code}) under valgrind:\n${stderr}`)));
    });
    const load = { url: `http://127.0.0.1:${port}${CHAT_PATH}`, body: smallChatBody(), headers: SDK_HEADERS, connections: 4, seconds: 0 };
    if (warmup > 0) await runLoad({ ...load, requests: warmup });
    execFileSync('callgrind_control', ['--zero', String(child.pid)], { stdio: 'ignore' });
    const run = await runLoad({ ...load, requests });
    if (run.failures > 0) throw new Error(`${target.name}: ${run.failures} failed requests`);
    execFileSync('callgrind_control', ['--dump=measured', String(child.pid)], { stdio: 'ignore' });
    let main = 0;
    let all = 0;
    for (const file of readdirSync(dir).filter((f) => f.startsWith(`${prefix.slice(dir.length + 1)}.`))) {
      const text = readFileSync(join(dir, file), 'utf8');
      const total = /^(?:summary|totals): (\d+)/m.exec(text);
      if (!total || !/^desc: Trigger: .*measured/m.test(text)) continue;
      all += Number(total[1]);
      // Thread 1 is the process's main thread: the event loop and every line of JavaScript.
      if (/-01$/.test(file)) main += Number(total[1]);
    }
    return { name: target.name, responses: run.responses, main: main / run.responses, all: all / run.responses };
  } finally {
    child.kill('SIGKILL');
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`bench:instructions: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
