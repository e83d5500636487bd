import { spawnSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { chosenLogFormat } from '../../src/telemetry/log-destination.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { jsonLines, listening, MAIN, runGateway, runProcess, type Proc } from '../helpers/process.js';

/*
 * What the log looks like where it is read. With `log.format` left at `auto`: a stdout that is a
 * pipe (a container runtime, a log shipper, `| jq`) gets JSON lines, with ISO-8601 times; a
 * terminal gets pino-pretty's readable lines. The terminal is a real one: the built gateway runs
 * under `script`, which gives it a pseudo-terminal as stdout.
 */

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const HAVE_SCRIPT = spawnSync('script', ['--version'], { stdio: 'ignore' }).status === 0;

let upstream: FakeUpstream | undefined;
let procs: Proc[] = [];
let gatewayPids: number[] = [];
afterEach(async () => {
  for (const pid of gatewayPids) killQuietly(pid);
  for (const p of procs) p.child.kill('SIGKILL');
  await upstream?.close();
  upstream = undefined;
  procs = [];
  gatewayPids = [];
});

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}

const plain = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, '').replace(/\r/g, '');

describe('stdout a pipe', () => {
  it.each([
    ['unset (auto)', {}],
    ['auto', { LOG_FORMAT: 'auto' }],
  ])('log.format %s: JSON lines only, pino’s and the access log’s alike with ISO-8601 times', async (_name, env) => {
    upstream = await startFakeUpstream();
    const proc = runGateway([], { PORT: '0', HOST: '127.0.0.1', UPSTREAM_URL: upstream.baseUrl, ...env });
    procs.push(proc);
    const origin = await listening(proc);
    expect((await fetch(`${origin}/v1/models`)).status).toBe(200);
    await expect.poll(() => jsonLines(proc).some((l) => l.msg === 'request completed'), { timeout: 10_000 }).toBe(true);
    const lines = plain(proc.output()).split('\n').filter(Boolean);
    expect(lines.filter((l) => !l.startsWith('{'))).toEqual([]);
    const logged = jsonLines(proc);
    expect(logged.map((l) => l.msg)).toEqual(expect.arrayContaining(['gateway ready', 'request completed']));
    for (const line of logged) {
      expect(line.time).toMatch(ISO);
      expect(new Date(line.time).toISOString()).toBe(line.time);
    }
    expect(proc.output()).toMatch(/"time":"\d{4}-/);
  });
});

describe.skipIf(!HAVE_SCRIPT)('stdout a terminal', () => {
  /** The built gateway with a pseudo-terminal as its stdout. */
  const atTerminal = (env: Record<string, string>) => {
    const proc = runProcess('script', ['-qfec', `${JSON.stringify(process.execPath)} ${JSON.stringify(MAIN)}`, '/dev/null'], env);
    procs.push(proc);
    return proc;
  };
  /** The gateway's own pid, as its ready line gives it. */
  const readyPid = async (proc: Proc, pattern: RegExp) => {
    await expect.poll(() => pattern.test(plain(proc.output())), { timeout: 15_000 }).toBe(true);
    const pid = Number(pattern.exec(plain(proc.output()))![1]);
    gatewayPids.push(pid);
    return pid;
  };

  it('log.format auto (the default): pretty lines with the time of day, no JSON', async () => {
    upstream = await startFakeUpstream();
    const proc = atTerminal({ PORT: '0', HOST: '127.0.0.1', UPSTREAM_URL: upstream.baseUrl });
    await readyPid(proc, /INFO \((\d+)\): gateway ready/);
    const out = plain(proc.output());
    expect(out).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(\d+\): gateway ready$/m);
    expect(out).toMatch(/^\s+"openai": "http:\/\/127\.0\.0\.1:\d+\/v1",?$/m);
    expect(out.split('\n').filter((l) => l.startsWith('{'))).toEqual([]);
    // Colours: a terminal shows them.
    expect(proc.output()).toMatch(/\x1b\[\d+m/);
  });

  it('log.format json at a terminal: JSON lines all the same', async () => {
    upstream = await startFakeUpstream();
    const proc = atTerminal({ PORT: '0', HOST: '127.0.0.1', UPSTREAM_URL: upstream.baseUrl, LOG_FORMAT: 'json' });
    await readyPid(proc, /"pid":(\d+),"msg":"gateway ready"/);
    const ready = plain(proc.output())
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
      .find((l) => l.msg === 'gateway ready');
    expect(ready.time).toMatch(ISO);
  });
});

describe('chosenLogFormat', () => {
  it.each([
    ['auto', true, 'pretty'],
    ['auto', false, 'json'],
    ['json', true, 'json'],
    ['pretty', false, 'pretty'],
  ] as const)('%s with a terminal %s: %s', (format, isTTY, chosen) => {
    expect(chosenLogFormat(format, isTTY)).toBe(chosen);
  });
});
