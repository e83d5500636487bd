// npm run try:overflow -- CODEX_BIN [400|413|failed]: the real Codex CLI through the gateway, in a
// 12-tool-call session whose 8th request is over the stand-in provider's limit.
//
// By hand, not in CI: install the CLI first (`npm install --prefix /tmp/codex @openai/codex@0.171.0`,
// about 420 MB) and pass its binary. The stand-in provider on loopback scripts the model: each turn
// it asks Codex to `cat` the next of 12 files (about 9 KB each), then answers "done"; it refuses
// any request body over LIMIT bytes the way its mode says. Codex must finish with exit 0, without
// compacting on its own. Everything listens on 127.0.0.1.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, run, startGateway, write, type RunResult } from './agent-harness.js';

type Mode = '400' | '413' | 'failed';
const MODES: readonly string[] = ['400', '413', 'failed'] satisfies Mode[];
const [codexBin, modeArg = '400'] = process.argv.slice(2);
if (!codexBin || !MODES.includes(modeArg)) {
  console.error('usage: npm run try:overflow -- CODEX_BIN [400|413|failed]');
  process.exit(2);
}
const mode = modeArg as Mode;
const FILES = 12;
const LIMIT = 110_000;
const RUN_MS = 300_000;

/** A Responses API output item, as the stand-in writes it. */
type Item = Record<string, unknown>;

interface Received {
  path: string;
  bytes: number;
  summarizer: boolean;
  refused: boolean;
  compaction: string | string[] | undefined;
}

const work = mkdtempSync(join(tmpdir(), 'try-overflow-'));
const project = join(work, 'project');
for (let i = 1; i <= FILES; i++) write(join(project, 'src', `module${i}.ts`), moduleText(i));

const provider = await startProvider();
const gateway = await startGateway(provider.origin, { built: true });
const home = join(work, 'codex-home');
const config = readFileSync(join(ROOT, 'deploy', 'agents', 'codex', 'config.toml'), 'utf8').replaceAll('http://127.0.0.1:8080', gateway.origin);
write(join(home, 'config.toml'), config);
let exit: RunResult;
try {
  exit = await run(
    codexBin,
    ['exec', '--skip-git-repo-check', '-s', 'read-only', 'Review every TypeScript file under src/, one at a time.'],
    { cwd: project, env: { PATH: process.env.PATH, HOME: work, CODEX_HOME: home, OPENAI_API_KEY: 'sk-try-overflow' } },
    RUN_MS,
  );
} finally {
  await gateway.stop();
  await provider.close();
}
const main = provider.received.filter((r) => !r.summarizer);
console.log(`mode ${mode}: codex exit ${exit.code}; ${main.length} model requests (${main.filter((r) => r.refused).length} refused), ${provider.received.length - main.length} summarizer calls, ${provider.steps} tool calls answered`);
for (const r of main) console.log(`  ${r.bytes} bytes${r.refused ? ' REFUSED' : ''}${r.compaction ? `  x-gateway-compaction: ${r.compaction}` : ''}`);
const compactedByCodex = main.some((r) => r.path.endsWith('/compact'));
console.log(`codex compacted on its own: ${compactedByCodex ? 'yes' : 'no'}`);
if (exit.code !== 0) console.log(exit.out.slice(-3000));
rmSync(work, { recursive: true, force: true });
process.exit(exit.code === 0 && provider.steps === FILES && !compactedByCodex ? 0 : 1);

function moduleText(i: number): string {
  const lines = [`// module${i}.ts: generated for try:overflow`];
  for (let n = 0; lines.join('\n').length < 9_000; n++) lines.push(`export function step${i}_${n}(value: number): number {\n  return value * ${n + 1} + ${i};\n}`);
  return lines.join('\n');
}

/** The scripted model, in the Responses API: one `cat` per turn, then a final answer. */
async function startProvider() {
  const state = { received: [] as Received[], steps: 0 };
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    const url = req.url ?? '/';
    const summarizer = req.headers['x-gateway-compaction'] === 'summarizer';
    const record: Received = { path: url.split('?')[0], bytes: Buffer.byteLength(body), summarizer, refused: false, compaction: req.headers['x-gateway-compaction'] };
    state.received.push(record);
    if (summarizer) return sendJson(res, 200, response([message('Summary: the user asked to review every file; the files read so far were shown.')]));
    if (!url.includes('/responses')) return sendJson(res, 200, { object: 'list', data: [] });
    if (record.bytes > LIMIT) {
      record.refused = true;
      return refuse(res);
    }
    const step = state.steps + 1;
    const items = step <= FILES ? [message(`[step ${step}/${FILES}] Reading src/module${step}.ts.`), call(step)] : [message('Done: every file reviewed.')];
    if (step <= FILES) state.steps = step;
    stream(res, items);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get received() {
      return state.received;
    },
    get steps() {
      return state.steps;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

function refuse(res: ServerResponse): void {
  const error = { message: 'Your input exceeds the context window of this model. Please adjust your input and try again.', type: 'invalid_request_error', param: 'input', code: 'context_length_exceeded' };
  if (mode === '400') return sendJson(res, 400, { error });
  if (mode === '413') {
    res.writeHead(413, { 'content-type': 'text/html' });
    res.end('<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>');
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const failed = { ...response([]), status: 'failed', error: { code: error.code, message: error.message } };
  res.end(sse('response.created', { response: { ...response([]), status: 'in_progress' } }, 0) + sse('response.failed', { response: failed }, 1));
}

function message(text: string): Item {
  return { type: 'message', id: `msg_${Math.random().toString(36).slice(2)}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] };
}

function call(step: number): Item {
  return { type: 'function_call', id: `fc_${step}`, status: 'completed', name: 'exec_command', arguments: JSON.stringify({ cmd: `cat src/module${step}.ts` }), call_id: `call_${step}` };
}

function response(output: Item[]) {
  const usage = { input_tokens: 1000, input_tokens_details: { cached_tokens: 0 }, output_tokens: 20, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 1020 };
  return { id: 'resp_try', object: 'response', created_at: 1, status: 'completed', model: 'stand-in', output, usage, error: null, incomplete_details: null };
}

function sse(type: string, data: Record<string, unknown>, n: number): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n, ...data })}\n\n`;
}

function stream(res: ServerResponse, items: Item[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  let n = 0;
  let text = sse('response.created', { response: { ...response([]), status: 'in_progress' } }, n++);
  items.forEach((item, index) => {
    text += sse('response.output_item.added', { output_index: index, item: { ...item, status: 'in_progress' } }, n++);
    text += sse('response.output_item.done', { output_index: index, item }, n++);
  });
  res.end(text + sse('response.completed', { response: response(items) }, n++));
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
