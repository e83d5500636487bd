// npm run try:overflow [-- [SCENARIO...] [--clis DIR] [--built] [--node MAJOR]]: the real agent
// CLIs through a real gateway process against the strict stand-in (startStandIn,
// test/helpers/provider.ts), where the agent's own protocol decides how a session ends (#45):
//
//   codex-zstd        Codex as it ships (request compression on), 12 reads, the stand-in refusing
//                     (a context_length 400) from the 7th request on: it must finish, rescued.
//   codex-compaction  Codex's own compaction call (request_kind "compaction", brought early by
//                     model_auto_compact_token_limit) overflowing: made to fit without a summary
//                     of the gateway's, nothing remembered from it.
//   claude-page       Claude Code reads two parts, then (`-c`) the person pastes an 80 KB log: no
//                     compaction can fit that behind the stand-in's nginx 413 page. The gateway
//                     says "prompt is too long"; Claude Code must compact itself, not retry.
//   claude-raw        the same with COMPACTION_TRANSLATE_OVERFLOW=false: the page as it came.
//   pi-page, pi-raw   pi in the same place: it must end with a clear overflow error, not a loop.
//   claude-own        Claude Code in a 20-read session the gateway rescues, its own auto-compact
//                     window brought low: does its own compaction still run, and on what count?
//   claude-own-control  the same without a limit: when its own compaction runs untouched.
//
// Codex compresses a body (zstd) only when it is signed in with ChatGPT and its provider is named
// "OpenAI" (codex-rs: responses_request_compression); with an API key it never does. So codex-zstd
// signs it in with a made-up ChatGPT login (auth.json, tokens that nothing verifies) and a provider
// named "OpenAI" at the gateway; its account calls (chatgpt_base_url) go to the trap.
//
// By hand, not in CI: the CLIs are installed from the npm registry at pinned versions into a
// temporary folder (about 1 GB, removed at the end), or taken from `--clis DIR`. The gateway runs
// from source (tsx) on this Node, from dist/ with --built, on another Node with --node 26
// (scripts/node-binary.ts). Everything listens on 127.0.0.1: each CLI's HTTP(S)_PROXY is a trap
// that refuses and records anything else. Each CLI run is bounded (RUN_MS), and the model's script
// stops a session past MAX_CALLS turns. What each CLI sent and got, the stand-in's calls and the
// gateway's log stay in the printed folder.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Received } from '../test/helpers/fake-upstream.js';
import { startStandIn, type Api, type Reply, type StandIn, type TooLong } from '../test/helpers/provider.js';
import { ROOT, run, startGateway, write, type RunResult } from './agent-harness.js';
import { decoded, startRelay, startTrap, type Turn } from './loopback.js';
import { nodeBinary } from './node-binary.js';

const PINS = {
  codex: { pkg: '@openai/codex', version: '0.171.0', bin: 'codex' },
  claude: { pkg: '@anthropic-ai/claude-code', version: '2.1.332', bin: 'claude' },
  pi: { pkg: '@mariozechner/pi-coding-agent', version: '0.73.1', bin: 'pi' },
} as const;
type AgentName = keyof typeof PINS;

const INSTALL_MS = 10 * 60_000;
const RUN_MS = 180_000;
const MAX_CALLS = 40;
const FINAL = 'TASK DONE: every part read.';
const TOO_MANY = 'Stopping: too many turns.';
/** Claude Code's compaction prompt opens so (its full and partial forms alike). */
const CLAUDE_SUMMARY = 'Your task is to create a detailed summary of the conversation so far';
/** pi's compaction call: its own system prompt. */
const PI_SUMMARY = 'You are a context summarization assistant';

const PROMPT = (n: number) => `Read notes/part1.txt through notes/part${n}.txt one at a time, then say TASK DONE.`;
const PASTE_MARK = 'BUILD LOG (pasted)';
/** A long session: 20 reads of 9 KB, Claude Code's history past 250 KB. */
const LONG = Array<number>(20).fill(9_000);
/** Claude Code's own compaction brought early: a window of 100k tokens (its least), compacting at 40% of it. */
const OWN_WINDOW = { CLAUDE_CODE_AUTO_COMPACT_WINDOW: '100000', CLAUDE_AUTOCOMPACT_PCT_OVERRIDE: '40' };
const LOG_ANSWER = 'LOG READ: the build failed in step 3.';
/** The ids of the script's tool calls, as each agent carries them back. */
const ID: Record<AgentName, RegExp> = { codex: /"call_(\d+)"/g, claude: /toolu_read_(\d+)/g, pi: /call_read_(\d+)/g };
const MODEL_PATH = /\/v1\/(responses(\/compact)?|messages|chat\/completions)$/;

interface Scenario {
  agent: AgentName;
  /** What the session reads, in order: each part's size in bytes. */
  parts: number[];
  /** Then a second prompt in the same session (`-c`): a log of this many bytes, pasted. */
  paste?: number;
  limitBytes?: number;
  tooLong: TooLong;
  gatewayEnv?: Record<string, string>;
  agentEnv?: Record<string, string>;
  /** Codex with an API key (deploy/agents/codex/config.toml) and these lines before it; without, signed in with ChatGPT. */
  codexWithKey?: string[];
  /** Judges the session and prints its report; true when it did what the issue asks. */
  judge: (s: Session) => boolean;
}

const SCENARIOS: Record<string, () => Promise<boolean>> = {
  'codex-zstd': codexZstd,
  'codex-compaction': codexCompaction,
  'claude-page': () =>
    once('claude-page', {
      agent: 'claude',
      parts: [9_000, 9_000],
      paste: 80_000,
      limitBytes: 75_000,
      tooLong: 'page',
      judge: judgeSelfCompaction,
    }),
  'claude-raw': () =>
    once('claude-raw', {
      agent: 'claude',
      parts: [9_000, 9_000],
      paste: 80_000,
      limitBytes: 75_000,
      tooLong: 'page',
      gatewayEnv: { COMPACTION_TRANSLATE_OVERFLOW: 'false' },
      judge: judgeRaw,
    }),
  'pi-page': () =>
    once('pi-page', { agent: 'pi', parts: [2_500, 2_500], paste: 25_000, limitBytes: 20_000, tooLong: 'page', judge: judgePi }),
  'pi-raw': () =>
    once('pi-raw', {
      agent: 'pi',
      parts: [2_500, 2_500],
      paste: 25_000,
      limitBytes: 20_000,
      tooLong: 'page',
      gatewayEnv: { COMPACTION_TRANSLATE_OVERFLOW: 'false' },
      judge: judgeRaw,
    }),
  'claude-own': () =>
    once('claude-own', {
      agent: 'claude',
      parts: LONG,
      limitBytes: 100_000,
      tooLong: 'stated',
      agentEnv: OWN_WINDOW,
      judge: judgeOwnCompaction,
    }),
  'claude-own-control': () =>
    once('claude-own-control', { agent: 'claude', parts: LONG, tooLong: 'stated', agentEnv: OWN_WINDOW, judge: judgeOwnCompaction }),
};

// Arguments: scenario names (none: all), --clis DIR, --built, --node MAJOR.
const args = process.argv.slice(2);
const built = args.includes('--built');
const valueOf = (flag: string) => (args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined);
const clisAt = valueOf('--clis');
const nodeMajor = valueOf('--node');
const names = args.filter((a, i) => !a.startsWith('--') && !['--clis', '--node'].includes(args[i - 1]));
for (const name of names) {
  if (!Object.hasOwn(SCENARIOS, name)) {
    console.error(`unknown scenario ${name}; known: ${Object.keys(SCENARIOS).join(', ')}`);
    process.exit(2);
  }
}
const chosen = names.length > 0 ? names : Object.keys(SCENARIOS);

const started = Date.now();
const work = mkdtempSync(join(tmpdir(), 'try-overflow-'));
const clis = clisAt ?? join(work, 'clis');
if (!clisAt) await install(clis);
const gatewayNode = nodeMajor ? join(nodeBinary(nodeMajor).dir, 'bin', 'node') : process.execPath;
const gatewayNodeVersion = (await run(gatewayNode, ['--version'], {}, 30_000)).out.trim();
const trap = await startTrap();
console.log(
  `try:overflow: gateway on node ${gatewayNodeVersion} from ${built ? 'dist/' : 'src/ (tsx)'}; ${Object.entries(PINS)
    .map(([n, p]) => `${n} ${p.version}`)
    .join(', ')}; CLIs in ${clis}; artifacts in ${work}`,
);
const results: Array<[string, boolean]> = [];
try {
  for (const name of chosen) results.push([name, await SCENARIOS[name]()]);
} finally {
  await trap.close();
  if (!clisAt) rmSync(clis, { recursive: true, force: true });
}
console.log(`\ntrap: traffic bound outside 127.0.0.1: ${trap.egress.length === 0 ? 'none' : [...new Set(trap.egress)].join(', ')}`);
console.log(`total ${seconds(Date.now() - started)} s: ${results.map(([n, ok]) => `${n} ${ok ? 'ok' : 'FAIL'}`).join(', ')}`);
process.exit(results.every(([, ok]) => ok) ? 0 : 1);

// ---------------------------------------------------------------------------------------------
// Installing and running a session

async function install(dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{"private":true}');
  const specs = Object.values(PINS).map((p) => `${p.pkg}@${p.version}`);
  const result = await run(
    'npm',
    ['install', '--no-audit', '--no-fund', '--loglevel=error', ...specs],
    { cwd: dir, env: process.env },
    INSTALL_MS,
  );
  if (result.code !== 0) {
    console.log(`try:overflow: npm install failed: ${result.out.slice(-800)}`);
    process.exit(1);
  }
}

interface Session {
  label: string;
  scenario: Scenario;
  /** The session's last run; with a paste, the run before it too. */
  exit: RunResult;
  before?: RunResult;
  ms: number;
  /** The first turn of the pasted prompt's run. */
  pasteFrom: number;
  /** What the CLI sent and got, as the relay in front of the gateway saw it. */
  turns: Turn[];
  /** What reached the stand-in (model calls, the summarizer's, anything else). */
  upstream: Received[];
  standin: StandIn;
  /** Model turns the script answered with a read. */
  toolCalls: number;
  gatewayLog: string;
  /** The calls the CLI made to its account backend (the trap). */
  backend: string[];
}

async function once(label: string, scenario: Scenario): Promise<boolean> {
  return scenario.judge(await session(label, scenario));
}

async function session(label: string, scenario: Scenario): Promise<Session> {
  const dir = join(work, label);
  const project = join(dir, 'project');
  const home = join(dir, 'home');
  scenario.parts.forEach((bytes, k) => write(join(project, 'notes', `part${k + 1}.txt`), partText(k + 1, scenario.parts.length, bytes)));
  const script = modelScript(scenario.agent, project, scenario.parts.length);
  const standin = await startStandIn({ limitBytes: scenario.limitBytes, tooLong: scenario.tooLong, reply: script.reply });
  const gateway = await startGateway(standin.origin, { built, node: gatewayNode, env: { LOG_LEVEL: 'info', ...scenario.gatewayEnv } });
  const turns: Turn[] = [];
  const relay = await startRelay(gateway.origin, turns);
  const backendBefore = trap.backend.length;
  const t0 = Date.now();
  let exit: RunResult;
  let before: RunResult | undefined;
  let pasteFrom = 0;
  try {
    exit = await runAgent(scenario, home, project, relay.origin, PROMPT(scenario.parts.length), false);
    if (scenario.paste) {
      before = exit;
      pasteFrom = turns.length + 1;
      exit = await runAgent(scenario, home, project, relay.origin, pastedLog(scenario.paste), true);
    }
  } finally {
    await relay.close();
    await gateway.stop();
    await standin.close();
  }
  const s: Session = {
    label,
    scenario,
    exit,
    before,
    pasteFrom,
    ms: Date.now() - t0,
    turns,
    upstream: standin.received,
    standin,
    toolCalls: script.toolCalls(),
    gatewayLog: gateway.log(),
    backend: trap.backend.slice(backendBefore),
  };
  writeFileSync(join(dir, 'cli.txt'), `${before ? `${before.out}\n---- the pasted prompt (-c) ----\n` : ''}${exit.out}`);
  writeFileSync(join(dir, 'gateway.log'), s.gatewayLog);
  const ends = (text: string) => (text.length > 4_000 ? `${text.slice(0, 2_000)} [...] ${text.slice(-2_000)}` : text);
  writeFileSync(join(dir, 'turns.jsonl'), turns.map((t) => JSON.stringify(t)).join('\n') + '\n');
  const answered = standin.received.map((r) => ({
    url: r.url,
    bytes: decodedSize(r),
    marked: r.headers['x-gateway-compaction'],
    body: decoded(r.body, String(r.headers['content-encoding'] ?? '')).toString('utf8'),
    status: standin.answerStatus(r),
    answer: ends(standin.answerBytes(r).toString('utf8')),
  }));
  writeFileSync(join(dir, 'upstream.jsonl'), answered.map((a) => JSON.stringify(a)).join('\n') + '\n');
  return s;
}

/** The environment every CLI gets: a home of its own, and the trap as its proxy. */
function baseEnv(home: string): Record<string, string> {
  const t = trap.origin;
  return {
    PATH: process.env.PATH ?? '',
    HOME: home,
    LANG: 'C.UTF-8',
    HTTPS_PROXY: t,
    HTTP_PROXY: t,
    https_proxy: t,
    http_proxy: t,
    NO_PROXY: '127.0.0.1,localhost',
    no_proxy: '127.0.0.1,localhost',
  };
}

/** One run of the agent on `prompt`, continuing its last session in `project` with `resume`. */
function runAgent(scenario: Scenario, home: string, project: string, origin: string, prompt: string, resume: boolean): Promise<RunResult> {
  const bin = join(clis, 'node_modules', '.bin', PINS[scenario.agent].bin);
  const env = { ...baseEnv(home), ...scenario.agentEnv };
  const more = resume ? ['-c'] : [];
  if (scenario.agent === 'codex') {
    const codexHome = join(home, 'codex');
    const withKey = scenario.codexWithKey;
    if (withKey) write(join(codexHome, 'config.toml'), [...withKey, snippet('codex/config.toml', origin)].join('\n'));
    else write(join(codexHome, 'config.toml'), codexConfig(origin));
    if (!withKey) write(join(codexHome, 'auth.json'), JSON.stringify(chatgptLogin()));
    const key = withKey ? { OPENAI_API_KEY: 'sk-try-overflow' } : {};
    return run(
      bin,
      ['exec', '--skip-git-repo-check', '-s', 'read-only', prompt],
      { cwd: project, env: { ...env, ...key, CODEX_HOME: codexHome } },
      RUN_MS,
    );
  }
  if (scenario.agent === 'claude') {
    write(join(home, '.claude', 'settings.json'), snippet('claude-code/settings.json', origin));
    const quiet = {
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1',
    };
    return run(bin, [...more, '-p', prompt], { cwd: project, env: { ...env, ...quiet, ANTHROPIC_API_KEY: 'sk-ant-try-overflow' } }, RUN_MS);
  }
  write(join(home, '.pi', 'agent', 'models.json'), snippet('pi/models.json', origin));
  const quiet = { PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1', PI_TELEMETRY: '0' };
  return run(
    bin,
    [...more, '-p', '--model', 'gateway/gpt-4.1', prompt],
    { cwd: project, env: { ...env, ...quiet, OPENAI_API_KEY: 'sk-try-overflow' } },
    RUN_MS,
  );
}

function snippet(file: string, origin: string): string {
  return readFileSync(join(ROOT, 'deploy', 'agents', file), 'utf8').replaceAll('http://127.0.0.1:8080', origin);
}

/** Codex signed in with ChatGPT, its provider named "OpenAI" at the gateway: the one setup in which it compresses. */
function codexConfig(origin: string): string {
  return [
    'model_provider = "gateway"',
    'cli_auth_credentials_store = "file"',
    `chatgpt_base_url = "${trap.origin}/backend-api/"`,
    '[analytics]',
    'enabled = false',
    '[model_providers.gateway]',
    'name = "OpenAI"',
    `base_url = "${origin}/v1"`,
    'wire_api = "responses"',
    'requires_openai_auth = true',
    '',
  ].join('\n');
}

/** A ChatGPT login as Codex stores it: unsigned tokens that expire in a month, refreshed just now. */
function chatgptLogin(): unknown {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const exp = Math.floor(Date.now() / 1000) + 30 * 24 * 3600;
  const claims = {
    exp,
    'https://api.openai.com/auth': {
      chatgpt_plan_type: 'plus',
      chatgpt_account_id: 'acct-try',
      chatgpt_user_id: 'user-try',
      user_id: 'user-try',
    },
  };
  const jwt = (c: unknown) => `${part({ alg: 'none', typ: 'JWT' })}.${part(c)}.${part('unsigned')}`;
  return {
    OPENAI_API_KEY: null,
    tokens: {
      id_token: jwt({ ...claims, email: 'try@example.invalid' }),
      access_token: jwt(claims),
      refresh_token: 'rt-try',
      account_id: 'acct-try',
    },
    last_refresh: new Date().toISOString(),
  };
}

// ---------------------------------------------------------------------------------------------
// The model's script

/**
 * The model: each agent turn reads the next part (one past the highest read so far, remembered
 * across the agent's own compaction, which drops the ids), then FINAL; an agent's compaction call
 * gets a summary; a side request (no tools) gets a word. Past MAX_CALLS turns it stops the loop.
 */
function modelScript(agent: AgentName, project: string, parts: number) {
  let read = 0;
  let calls = 0;
  let toolCalls = 0;
  const reply = (_api: Api, _n: number, req: Received): Reply => {
    const body = req.json;
    if (isAgentCompaction(agent, body, req.headers))
      return {
        text: `<summary>The user asked to read notes/part1.txt to part${parts}.txt one at a time, then say TASK DONE. Parts read so far: ${read}.</summary>`,
      };
    if (!offersTools(body)) return { text: 'OK.' };
    if (++calls > MAX_CALLS) return { text: TOO_MANY };
    if (newestUserText(body).includes(PASTE_MARK)) return { text: LOG_ANSWER };
    for (const m of JSON.stringify(body).matchAll(ID[agent])) read = Math.max(read, Number(m[1]));
    const next = read + 1;
    if (next > parts) return { text: FINAL };
    toolCalls++;
    const file = `notes/part${next}.txt`;
    if (agent === 'codex')
      return { text: `Reading ${file}.`, call: { id: `call_${next}`, name: 'exec_command', args: { cmd: `cat ${file}` } } };
    if (agent === 'claude')
      return { text: `Reading ${file}.`, call: { id: `toolu_read_${next}`, name: 'Read', args: { file_path: join(project, file) } } };
    return { text: `Reading ${file}.`, call: { id: `call_read_${next}`, name: 'read', args: { path: file } } };
  };
  return { reply, toolCalls: () => toolCalls };
}

function offersTools(body: any): boolean {
  if (Array.isArray(body?.tools) && body.tools.length > 0) return true;
  // Codex 0.171 sends its tools as an input item.
  return Array.isArray(body?.input) && body.input.some((item: any) => item?.type === 'additional_tools');
}

/** The agent's own compaction call, by its marks: Codex's turn metadata or endpoint, Claude Code's instruction, pi's system prompt. */
function isAgentCompaction(agent: AgentName, body: any, headers: Record<string, unknown>, path = ''): boolean {
  if (agent === 'codex')
    return path.endsWith('/responses/compact') || /"request_kind"\s*:\s*"compaction"/.test(String(headers['x-codex-turn-metadata'] ?? ''));
  if (agent === 'claude') return newestUserText(body).includes(CLAUDE_SUMMARY);
  return JSON.stringify(body?.messages?.[0] ?? '').includes(PI_SUMMARY);
}

function newestUserText(body: any): string {
  const last = Array.isArray(body?.messages) ? body.messages.at(-1) : undefined;
  if (last?.role !== 'user') return '';
  return typeof last.content === 'string' ? last.content : JSON.stringify(last.content ?? '');
}

/** The second prompt: a question, then a build log of about `bytes`. */
function pastedLog(bytes: number): string {
  const lines = [`What failed in this build? ${PASTE_MARK}:`];
  for (let n = 1; lines.join('\n').length < bytes; n++)
    lines.push(
      `[build ${String(n).padStart(5, '0')}] step ${n % 7}: compiling module ${n} of the service, ${n * 37} symbols, ${n % 13} warnings`,
    );
  return lines.join('\n').slice(0, bytes);
}

/** notes/partN.txt: a header that names it, then numbered lines of prose, `bytes` in all. */
function partText(i: number, of: number, bytes: number): string {
  const lines = [`notes/part${i}.txt: PART ${i} OF ${of}`];
  for (let n = 1; lines.join('\n').length < bytes; n++) {
    lines.push(
      `Part ${i}, note ${n}: the quarterly review lists item ${i * 1000 + n} as open, owned by team ${String.fromCharCode(65 + ((i + n) % 26))}, due in week ${(i * 7 + n) % 52}.`,
    );
  }
  return `${lines.join('\n').slice(0, bytes - 1)}\n`;
}

// ---------------------------------------------------------------------------------------------
// Codex: calibrated, then the real run

async function codexZstd(): Promise<boolean> {
  const parts = Array<number>(12).fill(9_000);
  const nth = 7;
  const calibration = await session('codex-calibrate', { agent: 'codex', parts, tooLong: 'stated', judge: () => true });
  const sizes = loopCalls(calibration).map((r) => decodedSize(r));
  console.log(
    `\n== codex-zstd: calibration run exit ${calibration.exit.code} after ${seconds(calibration.ms)} s, ${sizes.length} agent-loop requests, decoded sizes ${sizes.join(' ')}`,
  );
  if (sizes.length < nth) {
    console.log(`  fewer than ${nth} requests; last output:\n${calibration.exit.out.slice(-2000)}`);
    return false;
  }
  const limitBytes = sizes[nth - 1] - 1;
  console.log(`  limit ${limitBytes} bytes: request ${nth} (${sizes[nth - 1]}) is the first over it`);
  return judgeCodex(await session('codex-zstd', { agent: 'codex', parts, limitBytes, tooLong: 'stated', judge: () => true }));
}

/**
 * Codex's own compaction call (request_kind "compaction"), brought early by
 * model_auto_compact_token_limit: calibrated without a limit, then the limit set between the
 * largest turn before that call and the call itself, so that the call alone overflows.
 */
async function codexCompaction(): Promise<boolean> {
  const scenario: Scenario = {
    agent: 'codex',
    parts: Array<number>(12).fill(9_000),
    tooLong: 'stated',
    codexWithKey: ['model_auto_compact_token_limit = 25000'],
    judge: judgeCodexCompaction,
  };
  const calibration = await session('codex-compaction-calibrate', scenario);
  const model = modelTurns(calibration);
  const call = model.find((t) => isAgentCompaction('codex', parse(t.body), t.headers, t.path));
  const largest = Math.max(0, ...model.filter((t) => call && t.n < call.n).map((t) => t.bytes));
  console.log(
    `\n== codex-compaction: calibration run exit ${calibration.exit.code} after ${seconds(calibration.ms)} s, ${model.length} model requests; compaction call ${call ? `#${call.n} of ${call.bytes} B, the largest turn before it ${largest} B` : 'none'}`,
  );
  if (!call || call.bytes <= largest) {
    console.log(`  no compaction call larger than the turns before it; last output:\n${calibration.exit.out.slice(-1500)}`);
    return false;
  }
  const limitBytes = call.bytes - 1;
  console.log(`  limit ${limitBytes} bytes`);
  return scenario.judge(await session('codex-compaction', { ...scenario, limitBytes }));
}

function judgeCodexCompaction(s: Session): boolean {
  printCommon(s);
  const model = modelTurns(s);
  const calls = model.filter((t) => isAgentCompaction('codex', parse(t.body), t.headers, t.path));
  const fitted = calls.filter((t) => field(t.compaction, 'agent-compaction') === '1');
  const after = calls.length ? model.filter((t) => t.n > calls[0].n) : [];
  const recalled = after.filter((t) => field(t.compaction, 'memory') === 'hit');
  console.log(
    `  Codex compaction calls: ${calls.length} (${fitted.length} made to fit as the agent's own); summarizer calls ${s.standin.summarizerCalls().length}; turns after it recalled from memory: ${recalled.length}`,
  );
  return verdict(s, {
    'exit 0': s.exit.code === 0,
    'TASK DONE shown': s.exit.out.includes('TASK DONE'),
    'a compaction call made to fit': fitted.length > 0 && fitted.every((t) => t.status === 200),
    'no summarizer call': s.standin.summarizerCalls().length === 0,
    'nothing recalled from it': recalled.length === 0,
  });
}

function judgeCodex(s: Session): boolean {
  const model = modelTurns(s);
  const zstd = model.filter((t) => t.encoding === 'zstd').length;
  const forwarded = count(loopCalls(s).map((r) => String(r.headers['content-encoding'] ?? 'identity')));
  const rescued = model.filter((t) => field(t.compaction, 'outcome') === 'replayed');
  const ahead = model.filter((t) => field(t.compaction, 'outcome') === 'compacted');
  const refused = model.filter((t) => t.status >= 400);
  printCommon(s);
  console.log(
    `  request bodies Codex sent: ${zstd} of ${model.length} zstd (${count(model.map((t) => t.encoding || 'identity'))}); the stand-in got ${forwarded}`,
  );
  console.log(
    `  answers rescued (outcome=replayed): ${rescued.length}; sent compacted ahead (outcome=compacted): ${ahead.length}; errors the CLI saw: ${refused.length}`,
  );
  return verdict(s, {
    'exit 0': s.exit.code === 0,
    [`${s.scenario.parts.length}/${s.scenario.parts.length} parts read`]: s.toolCalls === s.scenario.parts.length,
    'TASK DONE shown': s.exit.out.includes('TASK DONE'),
    'bodies sent zstd': zstd > 0,
    'rescued at least once': rescued.length > 0,
    'no error reached Codex': refused.length === 0,
  });
}

// ---------------------------------------------------------------------------------------------
// The reports

function judgeSelfCompaction(s: Session): boolean {
  const { compactions, translated, repeats, instructionCut } = printOverflow(s);
  return verdict(s, {
    'the gateway translated the page': translated.length > 0,
    "Claude Code's own compaction ran": compactions.length > 0,
    'no identical request retried': repeats === 0,
    'its instruction reached the model whole': instructionCut === 0,
  });
}

function judgeRaw(s: Session): boolean {
  const { translated } = printOverflow(s);
  return verdict(s, { 'nothing translated (switched off)': translated.length === 0 });
}

function judgePi(s: Session): boolean {
  const { translated, repeats } = printOverflow(s);
  const model = modelTurns(s);
  return verdict(s, {
    'the gateway translated the page': translated.length > 0,
    'pi ended (not killed at the bound)': typeof s.exit.code === 'number',
    'no retry loop (at most 2 identical requests)': repeats <= 2 && model.length < MAX_CALLS,
    'an overflow error shown': /context|too long|overflow/i.test(lastLines(s.exit.out, 5)),
  });
}

/**
 * When Claude Code's own compaction ran, beside the two counts it could go by: its history (what it
 * sent, bytes / 4) and the usage.input_tokens of the answers (the stand-in counts what it got,
 * bytes / 4: after a rescue, the compacted request).
 */
function judgeOwnCompaction(s: Session): boolean {
  const { compactions } = printOverflow(s);
  const model = modelTurns(s).filter((t) => !compactions.includes(t) && t.status === 200);
  const answered = (t: Turn) => Math.ceil(Number(field(t.compaction, 'bytes-after') ?? t.bytes) / 4);
  console.log(
    `  per answered request, history sent (tokens by bytes / 4) / usage.input_tokens answered: ${model.map((t) => `#${t.n} ${Math.ceil(t.bytes / 4)}/${answered(t)}`).join(' ')}`,
  );
  const first = compactions[0];
  const before = first ? model.filter((t) => t.n < first.n).at(-1) : undefined;
  if (first && before)
    console.log(
      `  own compaction first at #${first.n}, after #${before.n}: history ${Math.ceil(before.bytes / 4)} tokens, usage answered ${answered(before)}`,
    );
  else
    console.log(
      `  own compaction: none in ${model.length} answered requests; history reached ${Math.ceil((model.at(-1)?.bytes ?? 0) / 4)} tokens, the most usage answered ${Math.max(0, ...model.map(answered))}`,
    );
  return verdict(s, { 'exit 0': s.exit.code === 0, 'TASK DONE shown': s.exit.out.includes('TASK DONE') });
}

/** The lines every overflow scenario prints; what the judges need from them. */
function printOverflow(s: Session) {
  printCommon(s);
  const model = modelTurns(s);
  const compactions = model.filter((t) => isAgentCompaction(s.scenario.agent, parse(t.body), t.headers, t.path));
  const translated = model.filter((t) => field(t.compaction, 'overflow-error') === 'translated');
  const repeats = model.length - new Set(model.map((t) => t.body)).size;
  console.log(
    `  agent's own compaction calls: ${compactions.length}${compactions.map((t) => ` #${t.n}`).join('')}; answers translated: ${translated.length}; identical requests repeated: ${repeats}`,
  );
  const fitted = s.upstream.filter((r) => field(String(r.headers['x-gateway-compaction'] ?? ''), 'agent-compaction') === '1');
  const whole = fitted.filter((r) => s.scenario.agent !== 'claude' || newestUserText(r.json).includes(CLAUDE_SUMMARY));
  if (fitted.length)
    console.log(
      `  compaction calls the gateway made to fit: ${fitted.length}, the agent's instruction whole in ${whole.length} (as the stand-in got them)`,
    );
  const counts = s.turns.filter((t) => t.path.endsWith('/count_tokens'));
  if (s.scenario.agent === 'claude')
    console.log(
      `  count_tokens calls: ${counts.length}${counts.map((t) => `\n    #${t.n} ${t.bytes} B: ${t.body.slice(0, 90).replace(/\s+/g, ' ')} -> ${t.status}`).join('')}`,
    );
  return { compactions, translated, repeats, instructionCut: fitted.length - whole.length };
}

function printCommon(s: Session): void {
  const { agent, limitBytes, tooLong } = s.scenario;
  const model = modelTurns(s);
  console.log(
    `\n== ${s.label}: ${agent} ${PINS[agent].version}, stand-in limit ${limitBytes ?? 'none'} bytes (${tooLong})${s.scenario.gatewayEnv ? `, gateway ${JSON.stringify(s.scenario.gatewayEnv)}` : ''}${s.scenario.agentEnv ? `, agent ${JSON.stringify(s.scenario.agentEnv)}` : ''}`,
  );
  if (s.before)
    console.log(
      `  first run: exit ${s.before.code}; last lines:\n${indent(lastLines(s.before.out, 2), '    | ')}\n  then the pasted prompt of ${s.scenario.paste} bytes (-c), from request #${s.pasteFrom}:`,
    );
  console.log(
    `  CLI exit ${s.exit.code} after ${seconds(s.ms)} s in all; the model asked ${s.toolCalls} reads (${s.scenario.parts.length} parts); last lines:\n${indent(lastLines(s.exit.out, 4), '    | ')}`,
  );
  const others = s.turns.filter((t) => !model.includes(t)).map((t) => `${t.method} ${t.path} ${t.status}`);
  console.log(
    `  CLI requests: ${s.turns.length}, ${model.length} to the model API; statuses ${count(model.map((t) => String(t.status)))}${others.length ? `; others: ${count(others)}` : ''}`,
  );
  const calls = s.standin.calls();
  console.log(
    `  stand-in: ${calls.length} model calls, ${s.standin.summarizerCalls().length} summarizer calls, ${calls.filter((r) => (s.standin.answerStatus(r) ?? 0) >= 400).length} refused`,
  );
  for (const t of model) {
    const kind = isAgentCompaction(agent, parse(t.body), t.headers, t.path) ? ' [agent compaction]' : '';
    const retry =
      t.headers['x-stainless-retry-count'] && t.headers['x-stainless-retry-count'] !== '0'
        ? ` retry=${t.headers['x-stainless-retry-count']}`
        : '';
    const header = t.compaction ? `  ${t.compaction}` : '';
    const error = t.status >= 400 ? `\n      -> ${t.error.replace(/\s+/g, ' ').slice(0, 200)}` : '';
    console.log(
      `    #${t.n} ${t.path} ${t.bytes} B${t.encoding ? ` (${t.encoding} ${t.wireBytes} B)` : ''}${kind}${retry} -> ${t.status}${header}${error}`,
    );
  }
  const decisions = logLines(s.gatewayLog).filter(
    (l) => l.msg !== 'request completed' && (l.compaction !== undefined || Number(l.level) >= 40),
  );
  console.log(`  gateway decisions (log): ${decisions.length}${decisions.map((l) => `\n    ${String(l.msg).slice(0, 260)}`).join('')}`);
  if (s.backend.length) console.log(`  account backend calls answered 404 by the trap: ${count(s.backend)}`);
}

function verdict(s: Session, checks: Record<string, boolean>): boolean {
  const failed = Object.entries(checks)
    .filter(([, ok]) => !ok)
    .map(([k]) => k);
  console.log(
    `  ${failed.length === 0 ? `ok: ${Object.keys(checks).join('; ')}` : `FAIL: ${failed.join('; ')} (artifacts in ${join(work, s.label)})`}`,
  );
  return failed.length === 0;
}

// ---------------------------------------------------------------------------------------------
// Small readers

function modelTurns(s: Session): Turn[] {
  return s.turns.filter((t) => t.method === 'POST' && MODEL_PATH.test(t.path));
}

/** The model calls of the agent's loop as the stand-in got them (its side requests and the summarizer's left out). */
function loopCalls(s: Session): Received[] {
  return s.standin.calls().filter((r) => offersTools(parse(decoded(r.body, String(r.headers['content-encoding'] ?? '')).toString('utf8'))));
}

function decodedSize(r: Received): number {
  return decoded(r.body, String(r.headers['content-encoding'] ?? '')).length;
}

function parse(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function field(header: string | undefined, name: string): string | undefined {
  return new RegExp(`(?:^|[,;]\\s*)${name}=([^,;]+)`).exec(header ?? '')?.[1];
}

function logLines(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .map(parse)
    .filter((j): j is Record<string, unknown> => j !== null && typeof j === 'object');
}

/** Values and how often each came, in order of first sight: "200x5 400". */
function count(values: string[]): string {
  const seen = new Map<string, number>();
  for (const v of values) seen.set(v, (seen.get(v) ?? 0) + 1);
  return [...seen].map(([v, n]) => (n > 1 ? `${v}x${n}` : v)).join(' ') || 'none';
}

function lastLines(text: string, n: number): string {
  return text
    .trim()
    .split('\n')
    .filter((l) => l.trim())
    .slice(-n)
    .map((l) => l.slice(0, 220))
    .join('\n');
}

function indent(text: string, prefix: string): string {
  return text
    .split('\n')
    .map((l) => prefix + l)
    .join('\n');
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(1);
}
