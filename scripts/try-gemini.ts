// npm run try:gemini -- [edge_413|invalid_argument|both] [GEMINI_BIN]: the real Gemini CLI through
// the built gateway, in a 12-tool-call session whose 8th generate request is the first over the
// stand-in's window.
//
// By hand, not in CI: `npm run build`, install the CLI (`npm install --prefix /tmp/gemini-cli
// @google/gemini-cli@0.61.0`, about 100 MB; its bin is the default GEMINI_BIN) and run this. The
// strict Gemini stand-in (test/helpers/strict-gemini.ts) scripts the model: each turn it asks
// Gemini CLI to `read_file` the next of 12 files (about 9 KB each), then answers with text. A first
// run without a limit records each generate request's body size; the limit is then set between the
// 7th and the 8th, and the session runs again once per mode: an edge proxy's 413 (edge_413), or the
// API's 400 INVALID_ARGUMENT "The input token count (N) exceeds ..." (invalid_argument).
//
// Gemini CLI is configured with the snippets in deploy/agents/gemini-cli (~/.gemini/.env and
// settings.json, in a temporary HOME), its telemetry, usage statistics and update checks off. It
// must finish with exit 0, every file read, no refusal but the overflow, without compacting on its
// own. Everything listens on 127.0.0.1; each run is bounded (RUN_MS).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Received } from '../test/helpers/fake-upstream.js';
import type { StrictGemini, StrictGeminiReject } from '../test/helpers/strict-gemini.js';
import { moduleText, ROOT, startGateway, write } from './agent-harness.js';
import { startStandIn } from '../test/helpers/provider.js';

const MODES = ['edge_413', 'invalid_argument'] as const;
type Mode = (typeof MODES)[number];

const [modeArg = 'both', geminiBin = '/tmp/gemini-cli/node_modules/.bin/gemini'] = process.argv.slice(2);
if (modeArg !== 'both' && !MODES.includes(modeArg as Mode)) {
  console.error('usage: npm run try:gemini -- [edge_413|invalid_argument|both] [GEMINI_BIN]');
  process.exit(2);
}
const FILES = 12;
const FIRST_OVER = 8;
const MODEL = 'gemini-3.1-pro-preview';
const API_KEY = 'AIza-try-gemini';
const PROMPT = 'Review every TypeScript file under src/, one at a time.';
const RUN_MS = 240_000;
const OVERFLOW = /^The input token count \(\d+\) exceeds the maximum number of tokens allowed \(\d+\)\.$|^413 Request Entity Too Large$/;

interface Outcome {
  limited: boolean;
  code: number | string;
  seconds: number;
  stdout: string;
  stderr: string;
  standIn: StrictGemini;
}

const calibration = await session();
const sizes = calibration.standIn.generateCalls().map((r) => r.body.length);
report('calibration (no limit)', calibration);
let ok = calibration.code === 0 && steps(calibration.standIn) === FILES;
if (
  sizes.length < FIRST_OVER ||
  sizes[FIRST_OVER - 1] <= sizes[FIRST_OVER - 2] ||
  sizes.slice(0, FIRST_OVER - 1).some((s) => s >= sizes[FIRST_OVER - 1])
) {
  console.log(`cannot calibrate: generate request sizes ${sizes.join(', ')}`);
  process.exit(1);
}
const limitBytes = Math.floor((Math.max(...sizes.slice(0, FIRST_OVER - 1)) + sizes[FIRST_OVER - 1]) / 2);
console.log(
  `limit: ${limitBytes} bytes (${Math.floor(limitBytes / 4)} tokens), between request ${FIRST_OVER - 1} (${sizes[FIRST_OVER - 2]} bytes) and ${FIRST_OVER} (${sizes[FIRST_OVER - 1]} bytes)\n`,
);

for (const mode of modeArg === 'both' ? MODES : [modeArg as Mode]) {
  const outcome = await session({ limitBytes, style: mode });
  ok = report(`mode ${mode}`, outcome) && ok;
}
process.exit(ok ? 0 : 1);

/** One Gemini CLI session through a fresh gateway and stand-in, in a fresh HOME and project. */
async function session(limits: { limitBytes?: number; style?: StrictGeminiReject } = {}): Promise<Outcome> {
  const work = mkdtempSync(join(tmpdir(), 'try-gemini-'));
  const project = join(work, 'project');
  for (let i = 1; i <= FILES; i++) write(join(project, 'src', `module${i}.ts`), moduleText(i, 'try:gemini'));
  const standIn = await startStandIn({ provider: 'gemini', ...limits, reply });
  const gateway = await startGateway(standIn.origin, { built: true, path: '' });
  const home = join(work, 'home');
  const snippet = (name: string) => readFileSync(join(ROOT, 'deploy', 'agents', 'gemini-cli', name), 'utf8');
  write(
    join(home, '.gemini', '.env'),
    snippet('.env').replaceAll('http://127.0.0.1:8080', gateway.origin).replace('your-gemini-api-key', API_KEY),
  );
  const settings = JSON.parse(snippet('settings.json'));
  settings.privacy = { usageStatisticsEnabled: false };
  settings.telemetry = { enabled: false };
  settings.general = { enableAutoUpdate: false, enableAutoUpdateNotification: false };
  write(join(home, '.gemini', 'settings.json'), JSON.stringify(settings, null, 2));
  try {
    const started = Date.now();
    const exit = await runGroup(
      geminiBin,
      ['-m', MODEL, '--yolo', '--skip-trust', '-p', PROMPT],
      { cwd: project, env: { PATH: process.env.PATH, HOME: home } },
      RUN_MS,
    );
    return { ...exit, limited: limits.limitBytes !== undefined, seconds: Math.round((Date.now() - started) / 1000), standIn };
  } finally {
    await gateway.stop();
    await standIn.close();
    rmSync(work, { recursive: true, force: true });
  }
}

/** The scripted model: the next file after the newest read_file call in `contents`, then text. */
function reply(req: Received) {
  const contents: any[] = req.json?.contents ?? [];
  const calls = contents.flatMap((c) => (c.parts ?? []).filter((p: any) => p.functionCall?.name === 'read_file'));
  const last = /module(\d+)\.ts/.exec(String(calls.at(-1)?.functionCall?.args?.file_path ?? ''));
  const step = (last ? Number(last[1]) : 0) + 1;
  if (step > FILES) return { text: 'Done: every file reviewed.' };
  return {
    text: `[step ${step}/${FILES}] Reading src/module${step}.ts.`,
    functionCall: { id: `read_${step}`, name: 'read_file', args: { file_path: `src/module${step}.ts` } },
  };
}

/** How many of the files the CLI read: functionResponses to read_file that carry the file's text. */
function steps(standIn: StrictGemini): number {
  const read = new Set<string>();
  for (const r of standIn.received) {
    for (const c of r.json?.contents ?? []) {
      for (const p of c.parts ?? []) {
        const m = /module(\d+)\.ts: generated/.exec(JSON.stringify(p.functionResponse?.response ?? ''));
        if (p.functionResponse?.name === 'read_file' && m) read.add(m[1]);
      }
    }
  }
  return read.size;
}

/** Prints what the stand-in saw; true when the session is as it must be. */
function report(title: string, { limited, code, seconds, stdout, stderr, standIn }: Outcome): boolean {
  const generate = standIn.generateCalls();
  const checks = standIn.checks();
  const others = standIn.received.filter(
    (r) => !generate.includes(r) && !standIn.summarizerCalls().includes(r) && !standIn.countTokensCalls().includes(r),
  );
  const lastLine = stdout.trim().split('\n').at(-1) ?? '';
  const refusals = checks.filter((c) => c.refused !== null);
  const otherRefusals = refusals.filter((c) => !OVERFLOW.test(c.refused!));
  const selfCompacted = standIn.received.some((r) => r.body.includes('<state_snapshot>') || r.body.includes('distilling chat history'));
  console.log(`== ${title}: gemini exit ${code} after ${seconds}s; last line: ${JSON.stringify(lastLine)}`);
  console.log(
    `   ${standIn.received.length} requests: ${generate.length} generate (${refusals.length} refused, ${otherRefusals.length} not for the window), ` +
      `${standIn.summarizerCalls().length} summarizer, ${standIn.countTokensCalls().length} countTokens, ${others.length} other; ${steps(standIn)}/${FILES} files read`,
  );
  generate.forEach((r, i) => {
    const compaction = r.headers['x-gateway-compaction'];
    const refused = checks[i]?.refused;
    console.log(
      `   ${String(i + 1).padStart(2)} ${r.url.split('?')[0].replace(/^\/v1beta\/models\//, '')} ${r.body.length} bytes, ${r.json?.contents?.length ?? '?'} contents${refused ? `  REFUSED: ${refused}` : ''}${compaction ? `  x-gateway-compaction: ${compaction}` : ''}`,
    );
  });
  for (const r of standIn.summarizerCalls())
    console.log(
      `   summarizer: ${r.url.split('?')[0].replace(/^\/v1beta\/models\//, '')} ${r.body.length} bytes, x-gateway-compaction: ${r.headers['x-gateway-compaction']}`,
    );
  for (const r of others) console.log(`   other: ${r.method} ${r.url}`);
  for (const c of otherRefusals) {
    const r = generate[checks.indexOf(c)];
    console.log(`   refusal not for the window: ${c.refused}\n   request: ${r.url} ${JSON.stringify(shape(r.json))}`);
  }
  // An overflowing turn: a refused generate request and the gateway's replay of it, the next one.
  const overflows = checks.flatMap((c, i) => (c.refused !== null && OVERFLOW.test(c.refused) ? [i] : []));
  for (const i of overflows)
    console.log(
      `   overflowing turn at request ${i + 1}: replay x-gateway-compaction: ${generate[i + 1]?.headers['x-gateway-compaction'] ?? '(no replay)'}`,
    );
  const replayed = overflows.every(
    (i) => /^outcome=replayed\b/.test(String(generate[i + 1]?.headers['x-gateway-compaction'] ?? '')) && checks[i + 1]?.refused === null,
  );
  console.log(`   gemini compacted on its own: ${selfCompacted ? 'yes' : 'no'}`);
  const errLines = stderr.trim() ? stderr.trim().split('\n') : [];
  console.log(`   gemini stderr: ${errLines.length} lines${errLines.length ? ':' : ''}`);
  for (const line of errLines.slice(-12)) console.log(`     | ${line}`);
  const ok =
    code === 0 &&
    steps(standIn) === FILES &&
    otherRefusals.length === 0 &&
    !selfCompacted &&
    replayed &&
    (limited ? overflows[0] === FIRST_OVER - 1 : overflows.length === 0);
  if (!ok) console.log(`   stdout (tail):\n${stdout.slice(-2000)}\n   stderr (tail):\n${stderr.slice(-4000)}`);
  console.log('');
  return ok;
}

/** A request's contents as roles and part kinds (functionCall names and ids, signatures present). */
function shape(body: any): unknown {
  return (body?.contents ?? []).map((c: any) => ({
    role: c.role,
    parts: (c.parts ?? []).map((p: any) =>
      p.functionCall
        ? `functionCall(${p.functionCall.name}, id=${p.functionCall.id ?? '-'})${p.thoughtSignature ? '+signature' : ''}`
        : p.functionResponse
          ? `functionResponse(${p.functionResponse.name}, id=${p.functionResponse.id ?? '-'})`
          : typeof p.text === 'string'
            ? `text(${p.text.length})`
            : Object.keys(p).join('+'),
    ),
  }));
}

/** Runs a command in its own process group to its end, bounded: the whole group is killed at the bound. */
function runGroup(
  cmd: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
  timeoutMs: number,
): Promise<{ code: number | string; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { ...options, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // The group is gone already.
      }
    }, timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // The group is gone already.
      }
      resolve({ code: timedOut ? `killed after ${timeoutMs / 1000}s` : (code ?? String(signal)), stdout, stderr });
    });
  });
}
