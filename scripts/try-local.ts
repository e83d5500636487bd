// npm run try:local [-- [--built] [PI_BIN | pi@VERSION]]: a real agent CLI (pi) on a local model
// that Ollama silently truncates, without and with the gateway.
//
// The model is the strict Ollama stand-in (startStandIn's `provider: 'ollama'`, test/helpers/strict-ollama.ts): a server
// of NUM_CTX tokens that, like Ollama, drops the oldest messages of a prompt over its window and
// answers 200 as if nothing happened. Its script: while the model still has its task (the first
// user message survived), each turn is ONE `read` tool call of the next of 12 notes files (about
// 2.5 KB each, so the conversation grows by ~650 tokens a turn), and after the 12th result it says
// TASK DONE; once the task is gone it answers plain text (LOST_TASK_ANSWER) and pi stops. NUM_CTX
// sits between pi's 7th and 8th request (the report prints each request's tokens).
//
//   a. pi straight at the stand-in's /v1: the session loses its task and stops early;
//   b. pi through the gateway (UPSTREAM_URL = the stand-in's /v1, window discovery on by default):
//      12 of 12 tool calls, TASK DONE, and no model call cut. Between pi and the gateway a relay
//      records what pi sent, so the report shows pi's own tokens beside what Ollama got.
//
// Exits non-zero when (b) does not finish or (a) unexpectedly does.
//
// Not part of CI: pi is installed from the npm registry into a temporary folder (as try-agents.ts
// does), unless a PI_BIN is given. The gateway runs from source (tsx), or from dist/ with --built.
// Everything listens on 127.0.0.1; pi's startup network (update checks, telemetry) is off, and its
// HTTP(S)_PROXY is a trap on loopback that refuses and records anything bound elsewhere.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Received } from '../test/helpers/fake-upstream.js';
import type { Reply } from '../test/helpers/provider.js';
import { LOST_TASK_ANSWER, promptTokensOf, type OllamaChatCall, type OllamaSeen } from '../test/helpers/strict-ollama.js';
import { ROOT, run, startGateway, write, type RunResult } from './agent-harness.js';
import { startRelay, startTrap, type Turn } from './loopback.js';
import { startStandIn } from '../test/helpers/provider.js';

const PI = { pkg: '@mariozechner/pi-coding-agent', version: '0.73.1' };
const MODEL = 'qwen3:8b';
const FILES = 12;
const FILE_BYTES = 2_500;
/**
 * Ollama's context (OLLAMA_CONTEXT_LENGTH): between pi 0.73.1's 7th request (5,354 tokens as the
 * stand-in counts them: ~1,350 of system prompt, tools and task, then ~667 a turn) and its 8th (6,021),
 * and far enough above the 7th that the gateway (which makes a request fit from 95% of a window)
 * first acts on the 8th.
 */
const NUM_CTX = 5_700;
/** Time between two chunks of a streamed answer (a real 8B model takes seconds a turn). */
const TOKEN_DELAY_MS = 100;
const INSTALL_MS = 10 * 60_000;
const RUN_MS = 180_000;
/** No session of this script needs more model calls than this; more is a loop, and the run stops. */
const MAX_CALLS = 40;
const TASK = `Read notes/part1.txt through notes/part${FILES}.txt one at a time with the read tool, then say TASK DONE.`;
const DONE = `TASK DONE: read ${FILES} parts`;
const SUMMARIZER = 'summarizer';

// Arguments: --built, and a pi binary or pi@VERSION.
const args = process.argv.slice(2);
const built = args.includes('--built');
const rest = args.filter((a) => a !== '--built');
const piArg = rest[0];
const version = piArg?.startsWith('pi@') ? piArg.slice(3) : PI.version;
const givenBin = piArg && !piArg.startsWith('pi@') ? piArg : undefined;

const started = Date.now();
const work = mkdtempSync(join(tmpdir(), 'try-local-'));
const trap = await startTrap();
let piBin = givenBin;
if (!piBin) {
  const dir = join(work, 'pi-cli');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{"private":true}');
  const install = await run(
    'npm',
    ['install', '--no-audit', '--no-fund', '--loglevel=error', `${PI.pkg}@${version}`],
    { cwd: dir, env: process.env },
    INSTALL_MS,
  );
  if (install.code !== 0) {
    console.log(`try:local: npm install ${PI.pkg}@${version} failed: ${install.out.slice(-800)}`);
    await trap.close();
    rmSync(work, { recursive: true, force: true });
    process.exit(1);
  }
  piBin = join(dir, 'node_modules', '.bin', 'pi');
}
const piVersion = (await run(piBin, ['--version'], { env: piEnv(join(work, 'version-home')) }, 30_000)).out.trim();
console.log(
  `try:local: pi ${piVersion || '?'} (${givenBin ?? `${PI.pkg}@${version}`}), ${installSeconds()} s to set up; Ollama stand-in num_ctx ${NUM_CTX}, ${FILES} files of ${FILE_BYTES} bytes; gateway from ${built ? 'dist/' : 'src/ (tsx)'}`,
);

interface Outcome {
  label: string;
  exit: RunResult;
  seconds: number;
  calls: OllamaChatCall[];
  discovery: Received[];
  truncations: string[];
  /** What pi itself sent (through the gateway: recorded before it). */
  sent: any[];
  gatewayLog?: string;
}

let direct: Outcome;
let through: Outcome;
try {
  direct = await session('a', false);
  through = await session('b', true);
} finally {
  await trap.close();
}

const okA = report(direct, false);
const okB = report(through, true);
console.log(`\ntrap (pi's traffic bound outside 127.0.0.1): ${[...trap.egress, ...trap.backend].join(', ') || 'none'}`);
console.log(`total ${((Date.now() - started) / 1000).toFixed(1)} s`);
const ok = okA && okB;
console.log(
  ok ? 'try:local: PASS (a lost its task as expected; b finished through the gateway)' : `try:local: FAIL (work folder kept: ${work})`,
);
if (ok) rmSync(work, { recursive: true, force: true });
process.exit(ok ? 0 : 1);

// ---------------------------------------------------------------------------------------------
// One session: a fresh Ollama stand-in (no model loaded yet), pi at it directly or through the gateway

async function session(label: string, viaGateway: boolean): Promise<Outcome> {
  const ollama = await startStandIn({
    provider: 'ollama',
    numCtx: NUM_CTX,
    models: [MODEL],
    reply: scriptedModel(),
    tokenDelayMs: TOKEN_DELAY_MS,
  });
  const gateway = viaGateway ? await startGateway(ollama.origin, { built }) : undefined;
  const turns: Turn[] = [];
  const relay = gateway ? await startRelay(gateway.origin, turns) : undefined;
  const baseUrl = relay ? `${relay.origin}/v1` : ollama.baseUrl;
  const dir = join(work, label);
  const home = join(dir, 'home');
  const project = join(dir, 'project');
  for (let i = 1; i <= FILES; i++) write(join(project, 'notes', `part${i}.txt`), partText(i));
  const models = JSON.parse(readFileSync(join(ROOT, 'deploy', 'agents', 'pi', 'models.json'), 'utf8')) as {
    providers: Record<string, Record<string, unknown>>;
  };
  const provider = { ...models.providers.gateway, baseUrl, models: [{ id: MODEL }] };
  write(join(home, '.pi', 'agent', 'models.json'), JSON.stringify({ providers: { local: provider } }, null, 2));
  const env = { ...piEnv(home), OPENAI_API_KEY: 'sk-local-dummy' };
  const start = Date.now();
  // Bounded in count too: past MAX_CALLS model calls the stand-in's answers stop the loop (see scriptedReply).
  const exit = await run(piBin!, ['-p', '--model', `local/${MODEL}`, TASK], { cwd: project, env }, RUN_MS);
  const seconds = (Date.now() - start) / 1000;
  writeFileSync(join(dir, 'pi-output.txt'), exit.out);
  const outcome: Outcome = {
    label,
    exit,
    seconds,
    calls: ollama.chatCalls(),
    discovery: ollama.discoveryCalls(),
    truncations: ollama.truncations(),
    sent: relay
      ? turns.filter((t) => t.path.startsWith('/v1/chat')).map((t) => jsonOrNull(t.body))
      : ollama.received.filter((r) => r.url.startsWith('/v1/chat')).map((r) => r.json),
  };
  if (gateway) {
    await gateway.stop();
    outcome.gatewayLog = gateway.log();
    writeFileSync(join(dir, 'gateway.log'), outcome.gatewayLog);
  }
  await relay?.close();
  await ollama.close();
  return outcome;
}

function piEnv(home: string): Record<string, string> {
  const t = trap.origin;
  return {
    PATH: process.env.PATH ?? '',
    HOME: home,
    LANG: 'C.UTF-8',
    // pi's own switches (try-multi.ts): no startup network, no install telemetry.
    PI_OFFLINE: '1',
    PI_SKIP_VERSION_CHECK: '1',
    PI_TELEMETRY: '0',
    HTTPS_PROXY: t,
    HTTP_PROXY: t,
    https_proxy: t,
    http_proxy: t,
    NO_PROXY: '127.0.0.1,localhost',
    no_proxy: '127.0.0.1,localhost',
  };
}

function installSeconds(): string {
  return ((Date.now() - started) / 1000).toFixed(1);
}

/** notes/partN.txt: a header that names it, then lines of prose, FILE_BYTES in all. */
function partText(i: number): string {
  const lines = [`notes/part${i}.txt: PART ${i} OF ${FILES}`];
  for (let n = 1; lines.join('\n').length < FILE_BYTES; n++) {
    lines.push(
      `Part ${i}, note ${n}: the quarterly review lists item ${i * 100 + n} as open, owned by team ${String.fromCharCode(65 + ((i + n) % 26))}, due in week ${(i * 7 + n) % 52}.`,
    );
  }
  return `${lines.join('\n').slice(0, FILE_BYTES - 1)}\n`;
}

// ---------------------------------------------------------------------------------------------
// The model's script

function isSummarizer(req: Received): boolean {
  return req.headers['x-gateway-compaction'] === SUMMARIZER;
}

function offersTools(body: any): boolean {
  return Array.isArray(body?.tools) && body.tools.length > 0;
}

/** The highest part the conversation shows read: our call ids (call_read_N), or a part's header line. */
function highestRead(messages: unknown): number {
  const text = JSON.stringify(messages ?? []);
  let max = 0;
  for (const m of text.matchAll(/call_read_(\d+)|PART (\d+) OF 12/g)) max = Math.max(max, Number(m[1] ?? m[2]));
  return max;
}

/**
 * The model: the summarizer's calls get a summary that restates the task; pi's turns a read of the
 * next part while the task is in what the model saw, TASK DONE after the last, and the stand-in's
 * LOST_TASK_ANSWER once the task was cut away. Past MAX_CALLS turns it stops the loop.
 */
function scriptedModel(): (n: number, req: Received, seen: OllamaSeen) => Reply {
  let turns = 0;
  return (_n, req, seen) => {
    if (isSummarizer(req)) {
      return {
        text: `Summary: the user asked to read the twelve notes files (part 1 to part 12) one by one with the read tool, then to say TASK DONE. Parts read so far: ${highestRead(req.json?.messages)} of ${FILES}.`,
      };
    }
    if (!offersTools(req.json)) return { text: 'OK.' };
    if (++turns > MAX_CALLS) return { text: 'Stopping: too many turns.' };
    if (!seen.taskKept) return { text: LOST_TASK_ANSWER };
    const step = highestRead(seen.messages) + 1;
    if (step > FILES) return { text: DONE };
    return {
      text: `Reading notes/part${step}.txt.`,
      call: { id: `call_read_${step}`, name: 'read', args: { path: `notes/part${step}.txt` } },
    };
  };
}

// ---------------------------------------------------------------------------------------------
// The report

function report(o: Outcome, viaGateway: boolean): boolean {
  const agentCalls = o.calls.filter((c) => !isSummarizer(c.received) && offersTools(c.received.json));
  const summarizerCalls = o.calls.filter((c) => isSummarizer(c.received));
  const toolCalls = agentCalls.filter((c) => c.answer?.call).length;
  // The tool results pi sent back: the highest of our call ids its requests carried in a tool message.
  const answered = Math.max(0, ...o.sent.map((b) => highestToolResult(b?.messages)));
  const done = o.exit.out.includes('TASK DONE');
  const cut = o.calls.filter((c) => c.truncated);
  const lost = agentCalls.filter((c) => !c.taskKept);
  console.log(
    `\n== ${o.label}: pi ${viaGateway ? 'through the gateway' : 'straight at Ollama'}: exit ${o.exit.code} after ${o.seconds.toFixed(1)} s; ${toolCalls} tool calls made, ${answered}/${FILES} answered; TASK DONE ${done ? 'shown' : 'NOT shown'}; ${agentCalls.length} model calls (${cut.length} cut by Ollama, ${lost.length} without the task), ${summarizerCalls.length} summarizer calls`,
  );
  const lastLine =
    o.exit.out
      .trim()
      .split('\n')
      .filter((l) => l.trim())
      .at(-1) ?? '';
  console.log(`  pi's last line: ${lastLine.slice(0, 160)}`);
  // Every call that reached the model, in order: what arrived, what Ollama kept of it, what the model did.
  console.log(`  Ollama's calls (prompt tokens as the stand-in counts them; window ${NUM_CTX}):`);
  let turn = 0;
  for (const c of o.calls) {
    const summarizer = isSummarizer(c.received);
    const what = summarizer
      ? '(gateway summarizer call)'
      : c.answer?.call
        ? `-> read ${String(c.answer.call.args.path)}`
        : `-> "${(c.answer?.text ?? '').slice(0, 40)}"`;
    const flags = c.truncated ? ` TRUNCATED (${c.droppedMessages} messages dropped${c.cut ? `, cut to ${c.cut.new} tokens` : ''})` : '';
    console.log(
      `   ${summarizer ? '  ' : String(++turn).padStart(2)}. sent ${c.promptTokens}, kept ${c.keptTokens}${flags}${c.taskKept ? '' : ' TASK LOST'} ${what}`,
    );
  }
  if (viaGateway) {
    // What pi itself sent (recorded before the gateway), and the x-gateway-compaction header it got back.
    const access = accessLines(o.gatewayLog ?? '').filter((a) => a.path === '/v1/chat/completions');
    console.log(`  pi's requests to the gateway (tokens of what pi sent; the access log's x-gateway-compaction):`);
    o.sent.forEach((b, i) => {
      const tokens = Array.isArray(b?.messages) ? promptTokensOf(b.messages, b.tools) : NaN;
      console.log(
        `   ${String(i + 1).padStart(2)}. ${tokens} tokens, ${b?.messages?.length ?? '?'} messages; ${access[i] ? `${access[i].status}${access[i].compaction ? `, ${access[i].compaction}` : ''}` : 'no access line'}`,
      );
    });
  }
  if (o.truncations.length)
    console.log(`  Ollama's log: ${o.truncations.length} "truncating input prompt" lines, first: ${o.truncations[0]}`);
  console.log(
    `  discovery calls Ollama saw: ${o.discovery.length === 0 ? 'none' : o.discovery.map((r) => `${r.method} ${r.url} (${r.headers['x-gateway-compaction'] ?? '-'})`).join(', ')}`,
  );
  if (viaGateway) {
    const log = o.gatewayLog ?? '';
    const windowLines = log
      .split('\n')
      .filter((l) => l.includes('context window of'))
      .map((l) => msgOf(l));
    console.log(`  gateway: ${windowLines.length ? windowLines.join('; ') : 'no window discovered'}`);
    // The lines with "trigger": the access lines (above, per request) and the compaction's own lines.
    const triggers = log.split('\n').filter((l) => l.includes('trigger'));
    const own = triggers.filter((l) => msgOf(l) !== 'request completed');
    console.log(
      `  gateway log lines with "trigger": ${triggers.length} (${triggers.length - own.length} access lines, shown above; ${own.length} of the compaction's own):`,
    );
    for (const l of own) console.log(`    ${msgOf(l)}`);
    const warnings = log
      .split('\n')
      .filter((l) => /"level":(40|50)/.test(l))
      .map((l) => msgOf(l));
    if (warnings.length) console.log(`  gateway warnings/errors: ${warnings.slice(0, 5).join(' | ')}`);
  }
  if (viaGateway) {
    const checks = {
      'exit 0': o.exit.code === 0,
      [`${FILES}/${FILES} tool calls`]: toolCalls === FILES && answered === FILES,
      'TASK DONE shown': done,
      'no model call truncated': cut.length === 0,
    };
    const failed = Object.entries(checks)
      .filter(([, v]) => !v)
      .map(([k]) => k);
    console.log(`  ${failed.length === 0 ? 'ok' : `FAIL: ${failed.join('; ')}`}`);
    if (failed.length) console.log(`  pi output (last 2000 chars):\n${o.exit.out.slice(-2000)}`);
    return failed.length === 0;
  }
  const finished = done || answered === FILES;
  const showedLoss = cut.length > 0 && lost.length > 0;
  console.log(
    `  ${!finished && showedLoss ? `ok: stopped after ${answered} of ${FILES}, its task cut away` : finished ? 'FAIL: it finished without the gateway (the window is not where it should be)' : 'FAIL: it stopped, but not because Ollama cut its task'}`,
  );
  if (finished || !showedLoss) console.log(`  pi output (last 2000 chars):\n${o.exit.out.slice(-2000)}`);
  return !finished && showedLoss;
}

function highestToolResult(messages: unknown): number {
  if (!Array.isArray(messages)) return 0;
  let max = 0;
  for (const m of messages) {
    const id = m?.role === 'tool' ? /^call_read_(\d+)$/.exec(String(m.tool_call_id ?? '')) : null;
    if (id) max = Math.max(max, Number(id[1]));
  }
  return max;
}

interface AccessLine {
  msg: string;
  path?: string;
  status?: number;
  compaction?: string;
}

function accessLines(text: string): AccessLine[] {
  const lines: AccessLine[] = [];
  for (const line of text.split('\n')) {
    try {
      const j = JSON.parse(line) as AccessLine | null;
      if (j?.msg === 'request completed') lines.push(j);
    } catch {
      // not a JSON line
    }
  }
  return lines;
}

function msgOf(line: string): string {
  try {
    return String((JSON.parse(line) as { msg?: unknown }).msg ?? line);
  } catch {
    return line;
  }
}

function jsonOrNull(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
