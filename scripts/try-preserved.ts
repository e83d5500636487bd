// npm run try:preserved -- AGENT CLI_BIN MODE: a real agent CLI (claude or codex) through the built
// gateway against a STRICT stand-in (signed thinking / encrypted reasoning bound to its prefix), in
// a 12-tool-call session whose 8th request is the first over the stand-in's limit.
//
// By hand, not in CI. Install the CLI first and pass its binary:
//   npm install --prefix /tmp/claude-cli @anthropic-ai/claude-code@2.1.332   (/tmp/claude-cli/node_modules/.bin/claude)
//   npm install --prefix /tmp/codex-cli @openai/codex@0.171.0               (/tmp/codex-cli/node_modules/.bin/codex)
// and `npm run build` (the gateway runs from dist/).
//
// MODE: `413` (Anthropic json_413, Responses edge_413), `window` (Anthropic prompt_too_long,
// Responses context_length) or `stream` (the refusal inside a 200 stream: Anthropic's error event,
// Responses' response.failed). The stand-in scripts the model: each answer (after its signed thinking
// block / encrypted reasoning item) asks the CLI to read the next of 12 files (about 9 KB each) in
// a temp project, Claude Code with a `Read` tool_use, Codex with an `exec_command` function_call,
// then a final text answer. The limit is calibrated first: an unlimited run records each request's
// body size as the stand-in got it, and the limit is the 8th's size minus 1. Then the real run.
//
// Between the CLI and the gateway a recording relay on loopback keeps each answer's status and
// x-gateway-compaction header; between the gateway and the stand-in a router sends the model API to
// the stand-in and answers anything else (a models list) itself, so the stand-in only judges what it
// should. Everything listens on 127.0.0.1; each CLI run is bounded (RUN_MS). The run's requests, the
// gateway log and the CLI's output stay in the printed folder.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { moduleText, ROOT, run, startGateway, write } from './agent-harness.js';
import { startRelay, type Turn } from './loopback.js';
import type { Received } from '../test/helpers/fake-upstream.js';
import type { BindingCheck, StrictAnthropicReject } from '../test/helpers/strict-anthropic.js';
import type { ReasoningCheck, StrictResponsesReject } from '../test/helpers/strict-responses.js';
import { startStandIn } from '../test/helpers/provider.js';

type Agent = 'claude' | 'codex';
const [agentArg, cliBin, modeArg] = process.argv.slice(2);
const STYLES: Record<Agent, Record<string, StrictAnthropicReject | StrictResponsesReject>> = {
  claude: {
    '413': 'json_413',
    window: 'prompt_too_long',
    stream: 'sse_error',
    json_413: 'json_413',
    prompt_too_long: 'prompt_too_long',
    sse_error: 'sse_error',
  },
  codex: {
    '413': 'edge_413',
    window: 'context_length',
    stream: 'stream_failed',
    edge_413: 'edge_413',
    context_length: 'context_length',
    stream_failed: 'stream_failed',
  },
};
if ((agentArg !== 'claude' && agentArg !== 'codex') || !cliBin || !modeArg || !STYLES[agentArg][modeArg]) {
  console.error('usage: npm run try:preserved -- claude|codex CLI_BIN 413|window|stream');
  process.exit(2);
}
const agent: Agent = agentArg;
const style = STYLES[agent][modeArg];
const FILES = 12;
const NTH = 8;
const RUN_MS = 280_000;
const FINAL = 'Done: every file reviewed.';
const PROMPT = 'Review every TypeScript file under src/, one at a time.';
/** How the stand-ins refuse a body for its size, in every style; any other refusal is about bound state. */
const OVERFLOW = /prompt is too long|Too Large|exceeds the maximum allowed number of bytes|exceeds the context window/;

const out = mkdtempSync(join(tmpdir(), `try-preserved-${agent}-${modeArg}-`));
console.log(`try:preserved ${agent} ${style}: artifacts in ${out}`);

const calibration = await session('calibrate', undefined);
const sizes = calibration.main.map((c) => c.bytes);
console.log(
  `calibration: exit ${calibration.exit.code} after ${((calibration.exit.ms ?? 0) / 1000).toFixed(1)} s, ${calibration.main.length} model requests, sizes ${sizes.join(' ')}`,
);
if (sizes.length < NTH) {
  console.log(`calibration run made fewer than ${NTH} model requests; last output:\n${calibration.exit.out.slice(-3000)}`);
  process.exit(1);
}
const limit = sizes[NTH - 1] - 1;
console.log(`limit: ${limit} bytes (request ${NTH} was ${sizes[NTH - 1]}, request ${NTH - 1} was ${sizes[NTH - 2]})`);
const real = await session('real', limit);
const ok = report(real);
process.exit(ok ? 0 : 1);

// ---------------------------------------------------------------------------------------------

interface Call {
  /** Index among the stand-in's non-summarizer model requests. */
  n: number;
  bytes: number;
  compaction: string | undefined;
  check: BindingCheck | ReasoningCheck | undefined;
  body: any;
}

interface Session {
  exit: { code: number | string; out: string; ms?: number };
  turns: Turn[];
  main: Call[];
  summarizer: number;
  others: string[];
  steps: number;
  gatewayLog: string;
}

async function session(label: string, limitBytes: number | undefined): Promise<Session> {
  const work = mkdtempSync(join(tmpdir(), 'try-preserved-run-'));
  const project = join(work, 'project');
  for (let i = 1; i <= FILES; i++) write(join(project, 'src', `module${i}.ts`), moduleText(i, 'try:preserved'));
  let steps = 0;
  const reply = (req: Received) => {
    const step = nextStep(req.json);
    if (step === null) return { text: 'OK.' };
    if (step > FILES) return { text: FINAL };
    steps = Math.max(steps, step);
    const text = `[step ${step}/${FILES}] Reading src/module${step}.ts.`;
    if (agent === 'claude')
      return { text, toolUse: { id: `toolu_read_${step}`, name: 'Read', input: { file_path: join(project, 'src', `module${step}.ts`) } } };
    return {
      text,
      call: { call_id: `call_${step}`, name: 'exec_command', arguments: JSON.stringify({ cmd: `cat src/module${step}.ts` }) },
    };
  };
  const standin =
    agent === 'claude'
      ? await startStandIn({ provider: 'anthropic', limitBytes, style: style as StrictAnthropicReject, reply })
      : await startStandIn({ provider: 'responses', limitBytes, style: style as StrictResponsesReject, reply });
  const others: string[] = [];
  const router = await startRouter(standin.origin, others);
  const gateway = await startGateway(router.origin, { built: true });
  const turns: Turn[] = [];
  const relay = await startRelay(gateway.origin, turns);
  const home = join(work, 'home');
  let exit: Session['exit'];
  const started = Date.now();
  try {
    exit = await runCli(home, project, relay.origin);
    exit.ms = Date.now() - started;
  } finally {
    await relay.close();
    await gateway.stop();
    await router.close();
    await standin.close();
  }
  const checks: Array<BindingCheck | ReasoningCheck> = standin.checks();
  const isSummarizer = (r: Received) => r.headers['x-gateway-compaction'] === 'summarizer';
  const modelCalls = standin.received.filter((r) => !isSummarizer(r));
  const main = modelCalls
    .map((r, n) => ({
      n,
      bytes: r.body.length,
      compaction: r.headers['x-gateway-compaction'] as string | undefined,
      check: checks[n],
      body: r.json,
    }))
    .filter((c) => isAgentLoop(c.body));
  const gatewayLog = gateway.log();
  writeFileSync(
    join(out, `${label}.requests.jsonl`),
    modelCalls
      .map((r, n) =>
        JSON.stringify({
          n,
          url: r.url,
          bytes: r.body.length,
          compaction: r.headers['x-gateway-compaction'] ?? null,
          check: checks[n] ?? null,
          body: r.json,
        }),
      )
      .join('\n') + '\n',
  );
  writeFileSync(join(out, `${label}.turns.jsonl`), turns.map((t) => JSON.stringify(t)).join('\n') + '\n');
  writeFileSync(join(out, `${label}.cli.txt`), exit.out);
  writeFileSync(join(out, `${label}.gateway.log`), gatewayLog);
  return { exit, turns, main, summarizer: standin.summarizerCalls().length, others, steps, gatewayLog };
}

/** The agent's own loop (its tools sent), not a side request of the CLI. Codex 0.171 sends its tools
 * as an `additional_tools` input item, not in `tools`. */
function isAgentLoop(body: any): boolean {
  if (Array.isArray(body?.tools) && body.tools.length > 0) return true;
  return Array.isArray(body?.input) && body.input.some((item: any) => item?.type === 'additional_tools');
}

/** The next file to ask for: one past the highest tool call of ours the request carries; null for a side request. */
function nextStep(body: any): number | null {
  if (!isAgentLoop(body)) return null;
  const text = JSON.stringify(agent === 'claude' ? body.messages : body.input);
  let max = 0;
  for (const m of text.matchAll(agent === 'claude' ? /toolu_read_(\d+)/g : /"call_(\d+)"/g)) max = Math.max(max, Number(m[1]));
  return max + 1;
}

async function runCli(home: string, project: string, origin: string) {
  const base = { PATH: process.env.PATH ?? '', HOME: home, LANG: 'C.UTF-8' };
  if (agent === 'claude') {
    const settings = readFileSync(join(ROOT, 'deploy', 'agents', 'claude-code', 'settings.json'), 'utf8').replaceAll(
      'http://127.0.0.1:8080',
      origin,
    );
    write(join(home, '.claude', 'settings.json'), settings);
    const env = {
      ...base,
      ANTHROPIC_API_KEY: 'sk-ant-try-preserved',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1',
    };
    return run(cliBin, ['-p', PROMPT], { cwd: project, env }, RUN_MS);
  }
  const codexHome = join(home, 'codex');
  const config = readFileSync(join(ROOT, 'deploy', 'agents', 'codex', 'config.toml'), 'utf8').replaceAll('http://127.0.0.1:8080', origin);
  write(join(codexHome, 'config.toml'), config);
  const env = { ...base, CODEX_HOME: codexHome, OPENAI_API_KEY: 'sk-try-preserved' };
  return run(cliBin, ['exec', '--skip-git-repo-check', '-s', 'read-only', PROMPT], { cwd: project, env }, RUN_MS);
}

// ---------------------------------------------------------------------------------------------
// The report

function field(header: string | undefined, name: string): string | undefined {
  return new RegExp(`(?:^|, )${name}=([^,]+)`).exec(header ?? '')?.[1];
}

function report(s: Session): boolean {
  const lastLine =
    s.exit.out
      .trim()
      .split('\n')
      .filter((l) => l.trim())
      .at(-1) ?? '';
  const checks = s.main.map((c) => c.check).filter((c): c is BindingCheck | ReasoningCheck => c !== undefined);
  const allChecks = s.main.map((c) => c.check);
  const refusals = s.main.filter((c) => c.check?.refused && !OVERFLOW.test(c.check.refused));
  const overflows = s.main.filter((c) => c.check?.refused && OVERFLOW.test(c.check.refused));
  const invalidOutside = checks.filter((c) => 'invalid' in c && c.invalid.length > 0 && !c.dropBlock).length;
  const droppedThinking = checks.reduce((n, c) => n + ('dropped' in c ? c.dropped.length : 0), 0);
  const removedReasoning = checks.reduce((n, c) => n + ('removed' in c ? c.removed.length : 0), 0);
  const model = s.turns.filter((t) => t.method === 'POST' && /\/v1\/(messages|responses)$/.test(t.path));
  console.log(`\n== ${agent} ${style}, limit ${limit} bytes`);
  console.log(`CLI exit ${s.exit.code} after ${((s.exit.ms ?? 0) / 1000).toFixed(1)} s; last line: ${lastLine}`);
  console.log(
    `CLI requests: ${s.turns.length} (${model.length} to the model API${s.turns.length > model.length ? `; others: ${[...new Set(s.turns.filter((t) => !model.includes(t)).map((t) => `${t.method} ${t.path}`))].join(', ')}` : ''})`,
  );
  console.log(
    `stand-in: ${s.main.length} agent-loop model requests (${overflows.length} refused for size), ${s.summarizer} summarizer calls, steps asked ${s.steps}/${FILES}${s.others.length ? `; router answered ${s.others.join(', ')}` : ''}`,
  );
  for (const c of s.main) {
    const said = c.check?.refused ? `  REFUSED: ${c.check.refused.slice(0, 160)}` : '';
    const dropped =
      c.check && 'dropped' in c.check && c.check.dropped.length
        ? `  dropped ${c.check.dropped.length}`
        : c.check && 'removed' in c.check && c.check.removed.length
          ? `  removed ${c.check.removed.length}`
          : '';
    console.log(`  #${c.n + 1} ${c.bytes} bytes${c.compaction ? ' (rewritten by the gateway)' : ''}${said}${dropped}`);
  }
  console.log('gateway headers per overflowing turn (x-gateway-compaction on the answer):');
  const headed = s.turns.filter((t) => t.compaction);
  for (const t of headed) {
    const f = (k: string) => field(t.compaction, k) ?? '-';
    console.log(
      `  turn ${t.n} (${t.wireBytes} bytes, status ${t.status}): outcome=${f('outcome')} trigger=${f('trigger')} thinking-stripped=${f('thinking-stripped')} block-binding=${f('block-binding')} binding-retry=${f('binding-retry')} reasoning-dropped=${f('reasoning-dropped')}`,
    );
    console.log(`    ${t.compaction}`);
  }
  if (headed.length === 0) console.log('  (none)');
  console.log(`binding refusals: ${refusals.length}`);
  for (const c of refusals)
    console.log(
      `  #${c.n + 1}${c.compaction ? ' (gateway rewrite)' : ' (as the CLI sent it)'}: ${c.check!.refused}\n    shape: ${shape(c.body)}`,
    );
  console.log(`invalid blocks outside drop_block: ${invalidOutside}`);
  if (agent === 'claude') console.log(`thinking blocks dropped by the stand-in under drop_block: ${droppedThinking}`);
  else console.log(`reasoning items dropped by the stand-in (prefix changed): ${removedReasoning}`);
  const unchecked = allChecks.filter((c) => c === undefined).length;
  if (unchecked) console.log(`(${unchecked} agent-loop requests without a stand-in check)`);
  const lastSent = model.at(-1)?.body ?? '';
  const read = Array.from({ length: FILES }, (_, k) => k + 1).filter((i) =>
    lastSent.includes(`// module${i}.ts: generated for try:preserved`),
  ).length;
  console.log(`files whose content the CLI's last request carries as tool results: ${read}/${FILES}`);
  const finished = s.exit.code === 0 && s.steps === FILES && read === FILES && s.exit.out.includes(FINAL);
  if (!finished) console.log(`the CLI did not finish the session; last output:\n${s.exit.out.slice(-3000)}`);
  return finished && refusals.length === 0 && invalidOutside === 0;
}

/** A request's shape: its fields, its thinking setting, and each message or item by role and block types. */
function shape(body: any): string {
  if (!body || typeof body !== 'object') return String(body);
  const items: any[] = agent === 'claude' ? (body.messages ?? []) : Array.isArray(body.input) ? body.input : [];
  const each = items.map((m, i) => {
    if (agent === 'claude')
      return `${i}:${m.role}[${typeof m.content === 'string' ? 'string' : (m.content ?? []).map((b: any) => b.type).join(',')}]`;
    return `${i}:${m.type ?? 'message'}${m.role ? `/${m.role}` : ''}${m.id ? `#${m.id}` : ''}`;
  });
  const setting =
    agent === 'claude'
      ? `thinking=${JSON.stringify(body.thinking)}`
      : `reasoning=${JSON.stringify(body.reasoning)} include=${JSON.stringify(body.include)} store=${body.store}`;
  return `keys ${Object.keys(body).join(',')}; ${setting}; ${each.join(' ')}`;
}

// ---------------------------------------------------------------------------------------------
// Loopback plumbing

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}

function closer(server: Server) {
  return () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
}

function forward(
  req: IncomingMessage,
  target: string,
  body: Buffer,
  onResponse: (up: IncomingMessage) => void,
  onError: (err: Error) => void,
) {
  const url = new URL(req.url ?? '/', target);
  const up = httpRequest(url, { method: req.method, headers: { ...req.headers, host: url.host } }, onResponse);
  up.on('error', onError);
  up.end(body);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** gateway -> router -> stand-in for the model API; anything else (a models list) answered here. */
async function startRouter(target: string, others: string[]) {
  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'POST' && /^\/v1\/(messages|responses|responses\/compact|chat\/completions)$/.test(path)) {
      return forward(
        req,
        target,
        body,
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
        (err) => {
          res.writeHead(502);
          res.end(String(err));
        },
      );
    }
    others.push(`${req.method} ${path}`);
    const text = JSON.stringify({ object: 'list', data: [] });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });
  const origin = await listen(server);
  return { origin, close: closer(server) };
}
