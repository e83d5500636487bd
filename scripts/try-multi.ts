// npm run try:multi -- CLAUDE_BIN CODEX_BIN PI_BIN: issue 27's "Done when", with the real CLIs.
// Claude Code, Codex and pi, at the same time, through ONE gateway with their own base URLs, each
// in a 12-tool-call session that overflows its own provider; each must exit 0, and no provider may
// see another's credential or the gateway key.
//
// By hand, not in CI. Install the CLIs first and pass their binaries:
//   npm install --prefix /tmp/claude-cli @anthropic-ai/claude-code@2.1.332
//   npm install --prefix /tmp/codex-cli @openai/codex@0.171.0
//   npm install --prefix /tmp/pi-cli @mariozechner/pi-coding-agent@0.73.1
// and `npm run build` (the gateway runs from dist/).
//
// Three providers on 127.0.0.1, test/helpers/multi-upstream.ts's fronts (each checks its paths and
// its key, and records every request) over the shared stand-ins: `anthropic` (Messages, the strict
// rules of test/helpers/strict-anthropic.ts; the gateway holds its key), `openai` (Responses,
// strict-responses.ts; the gateway holds its key) and `local` (a vLLM of windowed-provider.ts: chat
// completions only, no key). The stand-ins' `reply` scripts the model: each turn asks the CLI to
// read the next of 12 files (about 9 KB each), then answers FINAL; each refuses a body over its
// limit with its API's own context-length 400. The gateway requires a gateway key, which every CLI
// presents instead of a provider key. Each CLI runs in its own temp HOME with its telemetry off, and
// its HTTP(S)_PROXY pointed at a trap on loopback that refuses and records anything bound outside
// 127.0.0.1. Every run is bounded (RUN_MS). On failure the work folder (logs, requests) is kept and printed.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Received } from '../test/helpers/fake-upstream.js';
import {
  carries,
  credentialsOf,
  startAnthropicProvider,
  startLocal,
  startOpenAi,
  type Call,
  type Provider,
  type ProviderName,
} from '../test/helpers/multi-upstream.js';
import type { Reply } from '../test/helpers/provider.js';
import { moduleText, ROOT, run, startGatewayWith, write, type RunResult } from './agent-harness.js';
import { startTrap } from './loopback.js';

const bins = process.argv.slice(2);
if (bins.length !== 3) {
  console.error('usage: npm run try:multi -- CLAUDE_BIN CODEX_BIN PI_BIN');
  process.exit(2);
}
const [claudeBin, codexBin, piBin] = bins;
const FILES = 12;
const RUN_MS = 300_000;
const GATEWAY_KEY = 'gw-key-try';
const FINAL = 'Done: every file reviewed.';
const PROMPT = 'Review every TypeScript file under src/, one at a time.';
/** Every secret in play: whichever one a provider sees that is not its own is a leak. */
const SECRETS = [GATEWAY_KEY, 'sk-ant-gw', 'sk-openai-gw'];

type AgentName = 'claude' | 'codex' | 'pi';

interface ProviderSpec {
  key: string | undefined;
  header: string | undefined;
  limit: number;
  own: RegExp;
  agent: AgentName;
}

/**
 * Per provider: the key the gateway holds for it (and the header it goes in), its window in
 * request-body bytes (4 bytes a token; local's in tokens, below), the paths of its own API, and
 * the CLI it scripts. The limits sit about halfway through each CLI's session (Claude Code's first
 * body is ~50 KB, Codex's ~60 KB, pi's ~6 KB; each turn adds ~10 KB).
 */
const PROVIDERS: Record<ProviderName, ProviderSpec> = {
  anthropic: { key: 'sk-ant-gw', header: 'x-api-key', limit: 130_000, own: /^\/v1\/messages(\/count_tokens)?$/, agent: 'claude' },
  openai: {
    key: 'sk-openai-gw',
    header: 'authorization',
    limit: 110_000,
    own: /^\/v1\/(responses|responses\/compact|models)$/,
    agent: 'codex',
  },
  // A 26k-token vLLM model: it counts the prompt and max_completion_tokens together, so pi's
  // requests (16384 output tokens asked) are refused from ~38 KB, rescued first by a lower
  // completion limit, and past ~100 KB only by compaction. `limit` here is that window in tokens.
  local: { key: undefined, header: undefined, limit: 26_000, own: /^\/v1\/(chat\/completions|models)$/, agent: 'pi' },
};
/** A model-API path of any of the three: one that is not the provider's own is a foreign request. */
const MODEL_API = /^\/v1\/(messages|responses|chat\/completions)(\/|$)/;

/** How each CLI's loop is scripted: where its conversation is, whether it offered tools, how our call ids read, and the call that reads file `step`. */
interface Script {
  conversation: (body: any) => unknown;
  tools: (body: any) => boolean;
  ids: RegExp;
  call: (step: number) => NonNullable<Reply['call']>;
}

function offersTools(body: any): boolean {
  return Array.isArray(body?.tools) && body.tools.length > 0;
}

const SCRIPTS: Record<ProviderName, Script> = {
  anthropic: {
    conversation: (body) => body?.messages,
    tools: offersTools,
    ids: /toolu_read_(\d+)/g,
    call: (step) => ({
      id: `toolu_read_${step}`,
      name: 'Read',
      args: { file_path: join(work, 'claude', 'project', 'src', `module${step}.ts`) },
    }),
  },
  openai: {
    conversation: (body) => body?.input,
    // Codex 0.171 sends its tools as an `additional_tools` input item, not in `tools`.
    tools: (body) => offersTools(body) || (Array.isArray(body?.input) && body.input.some((i: any) => i?.type === 'additional_tools')),
    ids: /"call_read_(\d+)"/g,
    call: (step) => ({ id: `call_read_${step}`, name: 'exec_command', args: { cmd: `cat src/module${step}.ts` } }),
  },
  local: {
    conversation: (body) => body?.messages,
    tools: offersTools,
    ids: /call_read_(\d+)/g,
    call: (step) => ({ id: `call_read_${step}`, name: 'read', args: { path: join(work, 'pi', 'project', 'src', `module${step}.ts`) } }),
  },
};

interface CliResult {
  agent: AgentName;
  exit: RunResult;
  start: number;
  end: number;
}

/** A gateway access line, as the log has it (the fields the report reads). */
interface AccessLine {
  msg: string;
  method?: string;
  path?: string;
  status: number;
  upstream?: string;
  compaction?: string;
}

const work = mkdtempSync(join(tmpdir(), 'try-multi-'));
const providers: Record<ProviderName, Provider> = {
  anthropic: await startProvider('anthropic'),
  openai: await startProvider('openai'),
  local: await startProvider('local'),
};
const traps = { claude: await startTrap(), codex: await startTrap(), pi: await startTrap() };
const configFile = join(work, 'gateway.json');
write(configFile, JSON.stringify(gatewayConfig(), null, 2));
const gateway = await startGatewayWith(configFile);
const names = Object.keys(providers) as ProviderName[];
console.log(
  `try:multi: gateway ${gateway.origin}; providers ${names.map((n) => `${n} ${providers[n].baseUrl} (${limitText(n)})`).join(', ')}`,
);

let results: CliResult[];
try {
  results = await Promise.all([runClaude(), runCodex(), runPi()]);
} finally {
  await gateway.stop();
  for (const p of Object.values(providers)) await p.close();
  for (const t of Object.values(traps)) await t.close();
}
const log = gateway.log();
writeFileSync(join(work, 'gateway.log'), log);
const access = accessLines(log);
let ok = true;
for (const name of names)
  ok =
    report(
      name,
      providers[name],
      results.find((r) => r.agent === PROVIDERS[name].agent)!,
      access,
    ) && ok;
const startedAt = Math.min(...results.map((r) => r.start));
const overlap = Math.min(...results.map((r) => r.end)) - Math.max(...results.map((r) => r.start));
console.log(
  `\nconcurrency: the three CLIs ran together for ${(overlap / 1000).toFixed(1)} s (starts ${results.map((r) => `${r.agent} +${r.start - startedAt} ms`).join(', ')}); all done after ${((Math.max(...results.map((r) => r.end)) - startedAt) / 1000).toFixed(1)} s`,
);
const stray = access.filter((a) => !a.upstream);
if (stray.length) console.log(`gateway answered without an upstream: ${tally(stray.map((a) => `${a.method} ${a.path} ${a.status}`))}`);
console.log(ok ? 'try:multi: PASS' : `try:multi: FAIL (work folder kept: ${work})`);
if (ok) rmSync(work, { recursive: true, force: true });
process.exit(ok ? 0 : 1);

// ---------------------------------------------------------------------------------------------
// The gateway and the CLIs

function gatewayConfig() {
  const url = (name: ProviderName) => providers[name].baseUrl;
  return {
    server: { host: '127.0.0.1', port: 0 },
    // Loopback only, whatever the caller's HTTPS_PROXY says.
    upstream: { proxy: 'none' },
    auth: { keys: [GATEWAY_KEY] },
    upstreams: {
      anthropic: { url: url('anthropic'), apiKey: PROVIDERS.anthropic.key, apis: ['messages'] },
      openai: { url: url('openai'), apiKey: PROVIDERS.openai.key },
      local: { url: url('local'), apis: ['chat'] },
    },
    defaultUpstream: 'openai',
    routes: [
      { api: 'messages', upstream: 'anthropic' },
      { model: 'qwen*', upstream: 'local' },
    ],
  };
}

/** A CLI's own folder: a project of 12 files, a HOME, and the env every CLI gets. */
function setUp(agent: AgentName) {
  const dir = join(work, agent);
  const project = join(dir, 'project');
  for (let i = 1; i <= FILES; i++) write(join(project, 'src', `module${i}.ts`), moduleText(i, `try:multi (${agent})`));
  const home = join(dir, 'home');
  const trap = traps[agent].origin;
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    LANG: 'C.UTF-8',
    HTTPS_PROXY: trap,
    HTTP_PROXY: trap,
    https_proxy: trap,
    http_proxy: trap,
    NO_PROXY: '127.0.0.1,localhost',
    no_proxy: '127.0.0.1,localhost',
  };
  return { dir, project, home, env };
}

async function timed(agent: AgentName, promise: Promise<RunResult>): Promise<CliResult> {
  const start = Date.now();
  const exit = await promise;
  const end = Date.now();
  writeFileSync(join(work, agent, 'cli-output.txt'), exit.out);
  return { agent, exit, start, end };
}

function runClaude(): Promise<CliResult> {
  const { project, home, env } = setUp('claude');
  const base = `${gateway.origin}/anthropic`;
  write(join(home, '.claude', 'settings.json'), snippet('claude-code/settings.json').replaceAll('http://127.0.0.1:8080', base));
  // try-agents.ts's switches for Claude Code's own traffic (telemetry, updates, error reports).
  const claudeEnv = {
    ...env,
    ANTHROPIC_API_KEY: GATEWAY_KEY,
    ANTHROPIC_BASE_URL: base,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1',
  };
  return timed('claude', run(claudeBin, ['-p', PROMPT], { cwd: project, env: claudeEnv }, RUN_MS));
}

function runCodex(): Promise<CliResult> {
  const { project, home, env } = setUp('codex');
  const codexHome = join(home, 'codex');
  write(join(codexHome, 'config.toml'), snippet('codex/config.toml').replaceAll('http://127.0.0.1:8080/v1', `${gateway.origin}/openai/v1`));
  const codexEnv = { ...env, CODEX_HOME: codexHome, OPENAI_API_KEY: GATEWAY_KEY };
  return timed(
    'codex',
    run(codexBin, ['exec', '--skip-git-repo-check', '-s', 'read-only', PROMPT], { cwd: project, env: codexEnv }, RUN_MS),
  );
}

function runPi(): Promise<CliResult> {
  const { project, home, env } = setUp('pi');
  // Plain /v1: the gateway picks `local` by the model (routes: qwen*).
  const models = JSON.parse(snippet('pi/models.json')) as { providers: { gateway: { baseUrl: string; models: Array<{ id: string }> } } };
  models.providers.gateway.baseUrl = `${gateway.origin}/v1`;
  models.providers.gateway.models = [{ id: 'qwen3-coder' }];
  write(join(home, '.pi', 'agent', 'models.json'), JSON.stringify(models, null, 2));
  // pi's own switches: no startup network (version check, packages), no install telemetry.
  const piEnv = { ...env, OPENAI_API_KEY: GATEWAY_KEY, PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1', PI_TELEMETRY: '0' };
  return timed('pi', run(piBin, ['-p', '--model', 'gateway/qwen3-coder', PROMPT], { cwd: project, env: piEnv }, RUN_MS));
}

function snippet(file: string): string {
  return readFileSync(join(ROOT, 'deploy', 'agents', file), 'utf8');
}

// ---------------------------------------------------------------------------------------------
// The report

function accessLines(text: string): AccessLine[] {
  const lines: AccessLine[] = [];
  for (const line of text.split('\n')) {
    let j: AccessLine | null;
    try {
      j = JSON.parse(line) as AccessLine | null;
    } catch {
      continue;
    }
    if (j?.msg === 'request completed') lines.push(j);
  }
  return lines;
}

function limitText(name: ProviderName): string {
  return name === 'local' ? `window ${PROVIDERS.local.limit} tokens, prompt + completion` : `limit ${PROVIDERS[name].limit} bytes`;
}

function tally(items: string[]): string {
  const counts = new Map<string, number>();
  for (const i of items) counts.set(i, (counts.get(i) ?? 0) + 1);
  return [...counts].map(([k, n]) => `${k} x${n}`).join(', ') || 'none';
}

/** A refusal for size, in any of the three APIs' words (or nginx's 413). */
function tooLong(c: Call): boolean {
  return (
    c.status === 413 || (c.status === 400 && /prompt is too long|exceeds the context window|maximum context length/.test(c.error ?? ''))
  );
}

function pathOf(c: Call): string {
  return c.received.url.split('?')[0];
}

function report(name: ProviderName, p: Provider, result: CliResult, access: AccessLine[]): boolean {
  const spec = PROVIDERS[name];
  const { agent, exit } = result;
  const calls = p.calls();
  const model = calls.filter((c) => !c.summarizer && MODEL_API.test(pathOf(c)) && !pathOf(c).endsWith('/count_tokens'));
  const summarizer = calls.filter((c) => c.summarizer);
  const refused = model.filter(tooLong);
  // Anything else a provider said no to: a strict rule (tool pairs, signatures, shape), a path or a key.
  const ruled = calls.filter((c) => c.status >= 400 && !tooLong(c));
  const steps = new Map(model.filter((c) => c.status === 200).map((c) => [c, stepOf(name, c.received)]));
  const mine = access.filter((a) => a.upstream === name);
  const outcomes = mine.map((a) => /outcome=([a-z_]+)/.exec(a.compaction ?? '')?.[1]).filter(Boolean);
  const rescued = outcomes.filter((o) => o === 'replayed' || o === 'compacted').length;
  const strategies = mine
    .filter((a) => a.compaction)
    .map((a) => `${/outcome=([a-z_]+)/.exec(a.compaction ?? '')?.[1]}/${/strategy=([a-z_]+)/.exec(a.compaction ?? '')?.[1] ?? '-'}`);
  const failedAnswers = mine.filter((a) => a.status >= 400);
  const credentials = (c: Call) => credentialsOf(c.received).join(' ');
  const expected = spec.key === undefined ? '' : `${spec.header}: ${spec.header === 'authorization' ? `Bearer ${spec.key}` : spec.key}`;
  const leaks = calls.flatMap((c) =>
    SECRETS.filter((s) => s !== spec.key && carries(c.received, s)).map((s) => `${c.received.method} ${pathOf(c)}: ${s}`),
  );
  const wrongKey = calls.filter((c) => credentials(c) !== expected);
  const foreign = calls.filter((c) => !spec.own.test(pathOf(c)) && MODEL_API.test(pathOf(c)));
  const other = calls.filter((c) => !spec.own.test(pathOf(c)) && !MODEL_API.test(pathOf(c)));
  const turns = [...steps.values()].filter((s) => s !== null);
  const lastTurn = turns.at(-1);
  // How far the CLI got: the highest tool result it sent back, and whether the final answer went out.
  const answered = Math.max(0, ...turns.map((s) => s.step - 1));
  const finalSent = turns.some((s) => s.step > FILES);
  const lastLine =
    exit.out
      .trim()
      .split('\n')
      .filter((l) => l.trim())
      .at(-1) ?? '';
  const trap = [...traps[agent].egress, ...traps[agent].backend];
  const checks = {
    'exit 0': exit.code === 0,
    [`${FILES} tool calls answered`]: answered === FILES && finalSent,
    'last tool result read from disk': lastTurn?.carriesLastFile === true,
    'final answer shown': exit.out.includes(FINAL),
    'refused for size at least once': refused.length > 0,
    'rescued by the gateway': rescued > 0,
    'no refusal but for size': ruled.length === 0,
    'the CLI saw no error from the gateway': failedAnswers.length === 0,
    'no foreign key or gateway key': leaks.length === 0,
    'its own credential only': wrongKey.length === 0,
    'only its own API': foreign.length === 0,
  };
  const failed = Object.entries(checks)
    .filter(([, v]) => !v)
    .map(([k]) => k);
  const seconds = ((result.end - result.start) / 1000).toFixed(1);
  console.log(`\n== ${agent} -> ${name} (${limitText(name)}): ${failed.length === 0 ? 'ok' : `FAIL: ${failed.join('; ')}`}`);
  console.log(
    `${agent} exit ${exit.code} after ${seconds} s; ${model.length} model requests (${refused.length} refused), ${summarizer.length} summarizer calls (${summarizer.filter(tooLong).length} refused), ${answered}/${FILES} tool calls answered; last line: ${lastLine.slice(0, 120)}`,
  );
  for (const c of model) {
    const s = steps.get(c);
    const what = tooLong(c)
      ? ' REFUSED'
      : c.status !== 200
        ? ` ${c.status}: ${(c.error ?? '').slice(0, 300)}`
        : s === null
          ? ' (side request, no tools)'
          : ` step ${s?.step}`;
    console.log(`  ${c.received.method} ${pathOf(c)} ${c.received.body.length} bytes${what}`);
  }
  if (ruled.length)
    console.log(
      `refused by ${name} for other than size: ${tally(ruled.map((c) => `${c.received.method} ${pathOf(c)} ${c.status}${c.summarizer ? ' (summarizer)' : ''}: ${(c.error ?? '').slice(0, 300)}`))}`,
    );
  console.log(
    `gateway answers for ${name}: ${mine.length} (${tally(mine.map((a) => `${a.status}`))}); x-gateway-compaction outcome/strategy: ${tally(strategies)}`,
  );
  const firstRescue = mine.find((a) => /outcome=replayed/.test(a.compaction ?? ''));
  if (firstRescue) console.log(`  first replay: ${firstRescue.compaction}`);
  console.log(
    `credentials seen by ${name}: ${tally(calls.map((c) => credentials(c) || '(none)'))}; foreign or gateway keys: ${tally(leaks)}`,
  );
  console.log(
    `paths seen by ${name}: ${tally(calls.map((c) => `${c.received.method} ${pathOf(c)}`))}${foreign.length ? `; FOREIGN: ${tally(foreign.map(pathOf))}` : ''}${other.length ? `; other than the model API: ${tally(other.map((c) => `${c.received.method} ${pathOf(c)}`))}` : ''}`,
  );
  console.log(`${agent} tried to leave loopback: ${trap.length === 0 ? 'never' : tally(trap)}`);
  if (failed.length > 0) console.log(`${agent} output (last 3000 chars):\n${exit.out.slice(-3000)}`);
  const record = (c: Call) => ({
    method: c.received.method,
    path: pathOf(c),
    bytes: c.received.body.length,
    status: c.status,
    summarizer: c.summarizer,
    credentials: credentials(c),
    step: steps.get(c)?.step,
    error: c.error,
  });
  writeFileSync(join(work, `${name}.requests.jsonl`), calls.map((c) => JSON.stringify(record(c))).join('\n') + '\n');
  return failed.length === 0;
}

// ---------------------------------------------------------------------------------------------
// The providers: multi-upstream.ts's fronts over the shared stand-ins, the model scripted by `reply`

/**
 * The step an agent-loop request asks for: one past the highest of our tool calls it carries
 * (the newest tool result survives compaction: the gateway keeps the recent turns), and whether
 * it carries that call's file as read from disk. Null for a request without tools (a CLI's side request).
 */
function stepOf(name: ProviderName, req: Received): { step: number; carriesLastFile: boolean } | null {
  const script = SCRIPTS[name];
  if (!script.tools(req.json)) return null;
  const text = JSON.stringify(script.conversation(req.json) ?? []);
  let max = 0;
  for (const m of text.matchAll(script.ids)) max = Math.max(max, Number(m[1]));
  return {
    step: max + 1,
    carriesLastFile: max === 0 || text.includes(`// module${max}.ts: generated for try:multi (${PROVIDERS[name].agent})`),
  };
}

/** The scripted model: read the next file, then FINAL; a side request gets a plain answer. */
function scriptedReply(name: ProviderName): (api: unknown, n: number, req: Received) => Reply {
  return (_api, _n, req) => {
    const s = stepOf(name, req);
    if (s === null) return { text: 'OK.' };
    if (s.step > FILES) return { text: FINAL };
    return { text: `[step ${s.step}/${FILES}] Reading src/module${s.step}.ts.`, call: SCRIPTS[name].call(s.step) };
  };
}

/** One provider: its front (its paths, its key) over the stand-in for its API, at its limit. */
function startProvider(name: ProviderName): Promise<Provider> {
  const { key, limit } = PROVIDERS[name];
  const reply = scriptedReply(name);
  if (name === 'anthropic') return startAnthropicProvider({ limitBytes: limit, keys: [key!], reply });
  if (name === 'openai') return startOpenAi({ limitBytes: limit, keys: [key!], reply });
  return startLocal({ window: limit, reply });
}
