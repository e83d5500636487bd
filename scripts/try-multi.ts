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
// Three stand-in providers on 127.0.0.1, each a scripted model in its own API: `anthropic`
// (Messages; the gateway holds its key), `openai` (Responses; the gateway holds its key) and
// `local` (chat completions only, no key). Each turn asks the CLI to read the next of 12 files
// (about 9 KB each), then answers FINAL; each refuses any body over its limit with its API's own
// context-length 400. The gateway requires a gateway key, which every CLI presents instead of a
// provider key. Each CLI runs in its own temp HOME with its telemetry off, and its HTTP(S)_PROXY
// pointed at a trap on loopback that refuses and records anything bound outside 127.0.0.1.
// Every run is bounded (RUN_MS). On failure the work folder (logs, requests) is kept and printed.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, run, startGatewayWith, write, type RunResult } from './agent-harness.js';

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
const SUMMARY = 'Summary: the user asked to review every file under src/; the files read so far were shown and looked fine.';
/** Every secret in play: whichever one a provider sees that is not its own is a leak. */
const SECRETS = [GATEWAY_KEY, 'sk-ant-gw', 'sk-openai-gw'];
const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'api-key', 'x-goog-api-key'];

type ProviderName = 'anthropic' | 'openai' | 'local';
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
  openai: { key: 'sk-openai-gw', header: 'authorization', limit: 110_000, own: /^\/v1\/(responses|responses\/compact|models)$/, agent: 'codex' },
  // A 26k-token vLLM model: it counts the prompt and max_completion_tokens together, so pi's
  // requests (16384 output tokens asked) are refused from ~38 KB, rescued first by a lower
  // completion limit, and past ~100 KB only by compaction. `limit` here is that window in tokens.
  local: { key: undefined, header: undefined, limit: 26_000, own: /^\/v1\/(chat\/completions|models)$/, agent: 'pi' },
};
/** A model-API path of any of the three: one that is not the provider's own is a foreign request. */
const MODEL_API = /^\/v1\/(messages|responses|chat\/completions)(\/|$)/;

/** What the scripted models read of a request body (any of the three APIs). */
interface RequestJson {
  model?: unknown;
  stream?: unknown;
  messages?: unknown;
  input?: unknown;
  tools?: unknown;
  max_tokens?: unknown;
  max_completion_tokens?: unknown;
  stream_options?: { include_usage?: unknown };
}

interface Received {
  method: string | undefined;
  path: string;
  bytes: number;
  kind: 'summarizer' | 'model' | 'other';
  refused: boolean;
  /** The tool call this request asks for next; null for a request without tools. */
  step: number | null;
  carriesLastFile: boolean;
  credentials: string;
  ownKey: boolean;
  leaks: string[];
  error?: string;
  body?: undefined;
}

/** How far the CLI got: the highest tool result it sent back, and whether the final answer went out. */
interface ScriptState {
  maxResult: number;
  finalSent: boolean;
}

interface Answer {
  req: IncomingMessage;
  res: ServerResponse;
  json: RequestJson | undefined;
  record: Received;
  state: ScriptState;
  limit: number;
}

interface Provider {
  origin: string;
  received: Received[];
  state: ScriptState;
  close: () => Promise<void>;
}

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

type Item = Record<string, unknown>;

const work = mkdtempSync(join(tmpdir(), 'try-multi-'));
const providers: Record<ProviderName, Provider> = {
  anthropic: await startProvider('anthropic', anthropicAnswer),
  openai: await startProvider('openai', responsesAnswer),
  local: await startProvider('local', chatAnswer),
};
const traps = { claude: await startTrap(), codex: await startTrap(), pi: await startTrap() };
const configFile = join(work, 'gateway.json');
write(configFile, JSON.stringify(gatewayConfig(), null, 2));
const gateway = await startGatewayWith(configFile);
const names = Object.keys(providers) as ProviderName[];
console.log(`try:multi: gateway ${gateway.origin}; providers ${names.map((n) => `${n} ${providers[n].origin} (${limitText(n)})`).join(', ')}`);

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
for (const name of names) ok = report(name, providers[name], results.find((r) => r.agent === PROVIDERS[name].agent)!, access) && ok;
const startedAt = Math.min(...results.map((r) => r.start));
const overlap = Math.min(...results.map((r) => r.end)) - Math.max(...results.map((r) => r.start));
console.log(`\nconcurrency: the three CLIs ran together for ${(overlap / 1000).toFixed(1)} s (starts ${results.map((r) => `${r.agent} +${r.start - startedAt} ms`).join(', ')}); all done after ${((Math.max(...results.map((r) => r.end)) - startedAt) / 1000).toFixed(1)} s`);
const stray = access.filter((a) => !a.upstream);
if (stray.length) console.log(`gateway answered without an upstream: ${tally(stray.map((a) => `${a.method} ${a.path} ${a.status}`))}`);
console.log(ok ? 'try:multi: PASS' : `try:multi: FAIL (work folder kept: ${work})`);
if (ok) rmSync(work, { recursive: true, force: true });
process.exit(ok ? 0 : 1);

// ---------------------------------------------------------------------------------------------
// The gateway and the CLIs

function gatewayConfig() {
  const url = (name: ProviderName) => `${providers[name].origin}/v1`;
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
  for (let i = 1; i <= FILES; i++) write(join(project, 'src', `module${i}.ts`), moduleText(agent, i));
  const home = join(dir, 'home');
  const trap = traps[agent].origin;
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    LANG: 'C.UTF-8',
    HTTPS_PROXY: trap, HTTP_PROXY: trap, https_proxy: trap, http_proxy: trap,
    NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost',
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
  const claudeEnv = { ...env, ANTHROPIC_API_KEY: GATEWAY_KEY, ANTHROPIC_BASE_URL: base, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_TELEMETRY: '1', DISABLE_AUTOUPDATER: '1', DISABLE_ERROR_REPORTING: '1' };
  return timed('claude', run(claudeBin, ['-p', PROMPT], { cwd: project, env: claudeEnv }, RUN_MS));
}

function runCodex(): Promise<CliResult> {
  const { project, home, env } = setUp('codex');
  const codexHome = join(home, 'codex');
  write(join(codexHome, 'config.toml'), snippet('codex/config.toml').replaceAll('http://127.0.0.1:8080/v1', `${gateway.origin}/openai/v1`));
  const codexEnv = { ...env, CODEX_HOME: codexHome, OPENAI_API_KEY: GATEWAY_KEY };
  return timed('codex', run(codexBin, ['exec', '--skip-git-repo-check', '-s', 'read-only', PROMPT], { cwd: project, env: codexEnv }, RUN_MS));
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

function moduleText(agent: AgentName, i: number): string {
  const lines = [`// module${i}.ts: generated for try:multi (${agent})`];
  for (let n = 0; lines.join('\n').length < 9_000; n++) lines.push(`export function step${i}_${n}(value: number): number {\n  return value * ${n + 1} + ${i};\n}`);
  return lines.join('\n');
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

function report(name: ProviderName, p: Provider, result: CliResult, access: AccessLine[]): boolean {
  const spec = PROVIDERS[name];
  const { agent, exit } = result;
  const model = p.received.filter((r) => r.kind === 'model');
  const summarizer = p.received.filter((r) => r.kind === 'summarizer');
  const refused = model.filter((r) => r.refused);
  const mine = access.filter((a) => a.upstream === name);
  const outcomes = mine.map((a) => /outcome=([a-z_]+)/.exec(a.compaction ?? '')?.[1]).filter(Boolean);
  const rescued = outcomes.filter((o) => o === 'replayed' || o === 'compacted').length;
  const strategies = mine.filter((a) => a.compaction).map((a) => `${/outcome=([a-z_]+)/.exec(a.compaction ?? '')?.[1]}/${/strategy=([a-z_]+)/.exec(a.compaction ?? '')?.[1] ?? '-'}`);
  const failedAnswers = mine.filter((a) => a.status >= 400);
  const leaks = p.received.flatMap((r) => r.leaks.map((l) => `${r.method} ${r.path}: ${l}`));
  const wrongKey = p.received.filter((r) => !r.ownKey);
  const foreign = p.received.filter((r) => !spec.own.test(r.path) && MODEL_API.test(r.path));
  const other = p.received.filter((r) => !spec.own.test(r.path) && !MODEL_API.test(r.path));
  const lastTurn = model.filter((r) => !r.refused && r.step !== null).at(-1);
  const lastLine = exit.out.trim().split('\n').filter((l) => l.trim()).at(-1) ?? '';
  const answered = p.state.maxResult;
  const trap = traps[agent].seen;
  const checks = {
    'exit 0': exit.code === 0,
    [`${FILES} tool calls answered`]: answered === FILES && p.state.finalSent,
    'last tool result read from disk': lastTurn?.carriesLastFile === true,
    'final answer shown': exit.out.includes(FINAL),
    'refused for size at least once': refused.length > 0,
    'rescued by the gateway': rescued > 0,
    'the CLI saw no error from the gateway': failedAnswers.length === 0,
    'no foreign key or gateway key': leaks.length === 0,
    'its own credential only': wrongKey.length === 0,
    'only its own API': foreign.length === 0,
  };
  const failed = Object.entries(checks).filter(([, v]) => !v).map(([k]) => k);
  const seconds = ((result.end - result.start) / 1000).toFixed(1);
  console.log(`\n== ${agent} -> ${name} (${limitText(name)}): ${failed.length === 0 ? 'ok' : `FAIL: ${failed.join('; ')}`}`);
  console.log(`${agent} exit ${exit.code} after ${seconds} s; ${model.length} model requests (${refused.length} refused), ${summarizer.length} summarizer calls (${summarizer.filter((r) => r.refused).length} refused), ${answered}/${FILES} tool calls answered; last line: ${lastLine.slice(0, 120)}`);
  for (const r of model) console.log(`  ${r.method} ${r.path} ${r.bytes} bytes${r.refused ? ' REFUSED' : r.step === null ? ' (side request, no tools)' : ` step ${r.step}`}`);
  console.log(`gateway answers for ${name}: ${mine.length} (${tally(mine.map((a) => `${a.status}`))}); x-gateway-compaction outcome/strategy: ${tally(strategies)}`);
  const firstRescue = mine.find((a) => /outcome=replayed/.test(a.compaction ?? ''));
  if (firstRescue) console.log(`  first replay: ${firstRescue.compaction}`);
  console.log(`credentials seen by ${name}: ${tally(p.received.map((r) => r.credentials || '(none)'))}; foreign or gateway keys: ${tally(leaks)}`);
  console.log(`paths seen by ${name}: ${tally(p.received.map((r) => `${r.method} ${r.path}`))}${foreign.length ? `; FOREIGN: ${tally(foreign.map((r) => r.path))}` : ''}${other.length ? `; other than the model API: ${tally(other.map((r) => `${r.method} ${r.path}`))}` : ''}`);
  console.log(`${agent} tried to leave loopback: ${trap.length === 0 ? 'never' : tally(trap)}`);
  if (failed.length > 0) console.log(`${agent} output (last 3000 chars):\n${exit.out.slice(-3000)}`);
  writeFileSync(join(work, `${name}.requests.jsonl`), p.received.map((r) => JSON.stringify({ ...r, body: undefined })).join('\n') + '\n');
  return failed.length === 0;
}

// ---------------------------------------------------------------------------------------------
// The stand-in providers

/**
 * One provider on loopback: records every request (path, size, credential headers, leaks of any
 * other secret in any header or the body), then lets `answer` script the model in its API.
 */
async function startProvider(name: ProviderName, answer: (a: Answer) => void): Promise<Provider> {
  const spec = PROVIDERS[name];
  const state: ScriptState = { maxResult: 0, finalSent: false };
  const received: Received[] = [];
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    let json: RequestJson | undefined;
    try {
      json = JSON.parse(body) as RequestJson;
    } catch {
      json = undefined;
    }
    const path = (req.url ?? '/').split('?')[0];
    const summarizer = req.headers['x-gateway-compaction'] === 'summarizer';
    const raw = req.rawHeaders.join('\n');
    const credentials = CREDENTIAL_HEADERS.filter((h) => req.headers[h] !== undefined).map((h) => `${h}: ${req.headers[h]}`).join(' ');
    const expected = spec.key === undefined ? '' : `${spec.header}: ${spec.header === 'authorization' ? `Bearer ${spec.key}` : spec.key}`;
    const record: Received = {
      method: req.method,
      path,
      bytes: Buffer.byteLength(body),
      kind: summarizer ? 'summarizer' : MODEL_API.test(path) && !path.endsWith('/count_tokens') ? 'model' : 'other',
      refused: false,
      step: null,
      carriesLastFile: false,
      credentials,
      ownKey: credentials === expected,
      leaks: SECRETS.filter((s) => s !== spec.key && (raw.includes(s) || body.includes(s))),
    };
    received.push(record);
    // A bug in the script must not kill it: the gateway and the CLIs would outlive it.
    try {
      answer({ req, res, json, record, state, limit: spec.limit });
    } catch (err) {
      record.error = String((err as Error)?.stack ?? err);
      if (!res.headersSent) sendJson(res, 500, { error: { message: `try:multi stand-in bug: ${err}` } });
      else res.destroy();
    }
  });
  return { origin: await listen(server), received, state, close: () => close(server) };
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function close(server: Server): Promise<void> {
  return new Promise((r) => {
    server.closeAllConnections();
    server.close(() => r());
  });
}

function tokens(bytes: number): number {
  return Math.ceil(bytes / 4);
}

/**
 * The step an agent-loop request asks for: one past the highest of our tool calls it carries
 * (the newest tool result survives compaction: the gateway keeps the recent turns). Null for a
 * request without tools (a CLI's side request). Records how far the CLI got.
 */
function stepOf(record: Received, state: ScriptState, conversation: unknown, tools: boolean, idPattern: RegExp, agent: AgentName): number | null {
  if (!tools) return null;
  const text = JSON.stringify(conversation ?? []);
  let max = 0;
  for (const m of text.matchAll(idPattern)) max = Math.max(max, Number(m[1]));
  state.maxResult = Math.max(state.maxResult, max);
  record.carriesLastFile = max === 0 || text.includes(`// module${max}.ts: generated for try:multi (${agent})`);
  record.step = max + 1;
  if (record.step > FILES) state.finalSent = true;
  return record.step;
}

// Anthropic Messages

type Block = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

function anthropicAnswer({ res, json, record, state, limit }: Answer): void {
  if (record.path === '/v1/messages/count_tokens') return sendJson(res, 200, { input_tokens: tokens(record.bytes) });
  if (record.path !== '/v1/messages') return sendJson(res, 404, { type: 'error', error: { type: 'not_found_error', message: `Not found: ${record.method} ${record.path}` } });
  if (record.bytes > limit) {
    record.refused = true;
    // test/fixtures/upstream-errors.json, anthropic-prompt-too-long.
    return sendJson(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: `prompt is too long: ${tokens(record.bytes)} tokens > ${tokens(limit)} maximum` }, request_id: `req_try_${record.bytes}` });
  }
  const model = String(json?.model ?? 'claude-stand-in');
  let content: Block[];
  if (record.kind === 'summarizer') content = [{ type: 'text', text: SUMMARY }];
  else {
    const step = stepOf(record, state, json?.messages, Array.isArray(json?.tools) && json.tools.length > 0, /toolu_read_(\d+)/g, 'claude');
    if (step === null) content = [{ type: 'text', text: 'OK.' }];
    else if (step > FILES) content = [{ type: 'text', text: FINAL }];
    else {
      const file = join(work, 'claude', 'project', 'src', `module${step}.ts`);
      content = [{ type: 'text', text: `[step ${step}/${FILES}] Reading src/module${step}.ts.` }, { type: 'tool_use', id: `toolu_read_${step}`, name: 'Read', input: { file_path: file } }];
    }
  }
  const message = {
    id: `msg_try_${Math.random().toString(36).slice(2)}`,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: tokens(record.bytes), output_tokens: 20 },
  };
  if (json?.stream !== true) return sendJson(res, 200, message);
  // The API's event order (test/helpers/strict-anthropic.ts), one write per event.
  const ev = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const events = [ev('message_start', { message: { ...message, content: [], stop_reason: null, usage: { ...message.usage, output_tokens: 1 } } })];
  content.forEach((block, index) => {
    const start = block.type === 'tool_use' ? { ...block, input: {} } : { type: 'text', text: '' };
    const delta = block.type === 'tool_use' ? { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } : { type: 'text_delta', text: block.text };
    events.push(ev('content_block_start', { index, content_block: start }), ev('content_block_delta', { index, delta }), ev('content_block_stop', { index }));
  });
  events.push(ev('message_delta', { delta: { stop_reason: message.stop_reason, stop_sequence: null }, usage: { output_tokens: 20 } }), ev('message_stop', {}));
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const e of events) res.write(e);
  res.end();
}

// OpenAI Responses

function responsesAnswer({ res, json, record, state, limit }: Answer): void {
  if (!record.path.startsWith('/v1/responses')) return sendJson(res, 200, { object: 'list', data: [] });
  if (record.bytes > limit) {
    record.refused = true;
    return sendJson(res, 400, { error: { message: 'Your input exceeds the context window of this model. Please adjust your input and try again.', type: 'invalid_request_error', param: 'input', code: 'context_length_exceeded' } });
  }
  if (record.kind === 'summarizer') return sendJson(res, 200, response([message(SUMMARY)]));
  // Codex 0.171 sends its tools as an `additional_tools` input item, not in `tools`.
  const input: unknown[] = Array.isArray(json?.input) ? json.input : [];
  const tools = (Array.isArray(json?.tools) && json.tools.length > 0) || input.some((i) => (i as { type?: unknown } | null)?.type === 'additional_tools');
  const step = stepOf(record, state, input, tools, /"call_read_(\d+)"/g, 'codex');
  const items: Item[] =
    step === null ? [message('OK.')]
      : step > FILES ? [message(FINAL)]
        : [message(`[step ${step}/${FILES}] Reading src/module${step}.ts.`), { type: 'function_call', id: `fc_${step}`, status: 'completed', name: 'exec_command', arguments: JSON.stringify({ cmd: `cat src/module${step}.ts` }), call_id: `call_read_${step}` }];
  if (json?.stream !== true) return sendJson(res, 200, response(items));
  const sse = (type: string, data: Record<string, unknown>, n: number) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n, ...data })}\n\n`;
  let n = 0;
  let text = sse('response.created', { response: { ...response([]), status: 'in_progress' } }, n++);
  items.forEach((item, index) => {
    text += sse('response.output_item.added', { output_index: index, item: { ...item, status: 'in_progress' } }, n++);
    text += sse('response.output_item.done', { output_index: index, item }, n++);
  });
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.end(text + sse('response.completed', { response: response(items) }, n++));
}

function message(text: string): Item {
  return { type: 'message', id: `msg_${Math.random().toString(36).slice(2)}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] };
}

function response(output: Item[]) {
  const usage = { input_tokens: 1000, input_tokens_details: { cached_tokens: 0 }, output_tokens: 20, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 1020 };
  return { id: 'resp_try', object: 'response', created_at: 1, status: 'completed', model: 'stand-in', output, usage, error: null, incomplete_details: null };
}

// Chat completions, as vLLM serves them

interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

function chatAnswer({ res, json, record, state, limit }: Answer): void {
  if (record.path === '/v1/models') return sendJson(res, 200, { object: 'list', data: [{ id: 'qwen3-coder', object: 'model', created: 1, owned_by: 'vllm' }] });
  if (record.path !== '/v1/chat/completions') return sendJson(res, 404, { object: 'error', message: `Not Found: ${record.path}`, type: 'NotFoundError', param: null, code: 404 });
  const model = String(json?.model ?? 'qwen3-coder');
  // vLLM refuses when the prompt and the requested completion together pass the window.
  const prompt = tokens(record.bytes);
  const out = Number(json?.max_completion_tokens ?? json?.max_tokens ?? 1);
  const window = limit;
  if (prompt + out > window) {
    record.refused = true;
    // test/fixtures/upstream-errors.json, vllm-ctx-new-format.
    return sendJson(res, 400, { error: { message: `This model's maximum context length is ${window} tokens. However, you requested ${out} output tokens and your prompt contains at least ${prompt} input tokens, for a total of at least ${prompt + out} tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=${prompt})`, type: 'BadRequestError', param: 'input_tokens', code: 400 } });
  }
  const base = { id: `chatcmpl-try-${record.bytes}`, created: 1, model };
  const usage = { prompt_tokens: tokens(record.bytes), completion_tokens: 20, total_tokens: tokens(record.bytes) + 20 };
  let reply: { content: string; tool_calls?: ToolCall[] };
  if (record.kind === 'summarizer') reply = { content: SUMMARY };
  else {
    const messages = Array.isArray(json?.messages) ? json.messages : [];
    const step = stepOf(record, state, messages, Array.isArray(json?.tools) && json.tools.length > 0, /call_read_(\d+)/g, 'pi');
    if (step === null) reply = { content: 'OK.' };
    else if (step > FILES) reply = { content: FINAL };
    else {
      const file = join(work, 'pi', 'project', 'src', `module${step}.ts`);
      reply = { content: `[step ${step}/${FILES}] Reading src/module${step}.ts.`, tool_calls: [{ id: `call_read_${step}`, type: 'function', function: { name: 'read', arguments: JSON.stringify({ path: file }) } }] };
    }
  }
  const finish = reply.tool_calls ? 'tool_calls' : 'stop';
  if (json?.stream !== true) {
    return sendJson(res, 200, { ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: reply.content, ...(reply.tool_calls ? { tool_calls: reply.tool_calls } : {}) }, finish_reason: finish }], usage });
  }
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...extra })}\n\n`;
  let text = chunk([{ index: 0, delta: { role: 'assistant', content: reply.content }, finish_reason: null }]);
  if (reply.tool_calls) text += chunk([{ index: 0, delta: { tool_calls: reply.tool_calls.map((c, index) => ({ index, ...c })) }, finish_reason: null }]);
  text += chunk([{ index: 0, delta: {}, finish_reason: finish }]);
  if (json?.stream_options?.include_usage) text += chunk([], { usage });
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.end(`${text}data: [DONE]\n\n`);
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

// ---------------------------------------------------------------------------------------------
// The egress trap

/** A forward proxy that forwards nothing: it records where a CLI tried to go and refuses. */
async function startTrap(): Promise<{ origin: string; seen: string[]; close: () => Promise<void> }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.writeHead(403, { 'content-type': 'text/plain' });
    res.end('try:multi: no traffic outside loopback\n');
  });
  server.on('connect', (req, socket) => {
    seen.push(`CONNECT ${req.url}`);
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
  });
  return { origin: await listen(server), seen, close: () => close(server) };
}
