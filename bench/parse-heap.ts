/*
 * What the rescue's reader holds once it has read a body, for bodies of every shape an adversary
 * or an agent sends: the heap held after a full collection (the body's text, what was parsed out
 * of it, the reader's source texts), set against the estimate (src/rescue/budget.ts) from the
 * body's scanned shape. Each shape runs in a child process of its own, so that one's garbage
 * does not count in the next; the longest the event loop was held while reading is reported too.
 *
 *   npx tsx bench/parse-heap.ts [shape ...]
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { StringDecoder } from 'node:string_decoder';
import { agentConversationBody, manyStringsBody, tinyTurnsBody, wideObjectBody } from '../test/helpers/hostile-bodies.js';
import { scanJson } from '../src/lib/json-shape.js';
import { rescueHeapCost } from '../src/rescue/budget.js';
import { parseObject } from '../src/lib/json-source.js';
import { MAX_COMPACTABLE_DEPTH, MAX_PIECE_TOKENS } from '../src/rescue/request.js';

const SHAPES: Record<string, () => Buffer> = {
  'wide object, 3M keys': () => wideObjectBody(3_000_000, 0),
  'many strings, 8M': () => manyStringsBody(8_000_000, 0),
  'distinct short strings, 4M': () => distinctStringsBody(4_000_000),
  'numbers, 10M': () => Buffer.from(`{"model":"m","messages":[{"role":"user","content":[${'0.5,"a",'.repeat(5_000_000)}0]}]}`),
  'empty lists, 5M': () => Buffer.from(`{"model":"m","messages":[{"role":"user","content":[${'[],'.repeat(5_000_000)}[]]}]}`),
  'empty objects, 3M': () => Buffer.from(`{"model":"m","messages":[${'{},'.repeat(3_000_000)}{"role":"user","content":"go"}]}`),
  'tiny turns, 1M': () => tinyTurnsBody(1_000_000, 0),
  'agent, 20 MB of 37k messages': () => agentConversationBody(20 * 2 ** 20, 37_000, 0),
  'agent, 53 MB of 2k messages': () => agentConversationBody(53 * 2 ** 20, 2_000, 0),
  'agent, 20 MB with one character outside Latin-1': () =>
    Buffer.concat([Buffer.from('{"system":"→",'), agentConversationBody(20 * 2 ** 20, 2_000, 0).subarray(1)]),
};

function distinctStringsBody(n: number): Buffer {
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(`"${i.toString(36)}"`);
  return Buffer.from(`{"model":"m","messages":[{"role":"user","content":[${parts.join(',')}]}]}`);
}

/** The body in the 64 KB chunks Node's HTTP parser delivers. */
function chunked(body: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < body.length; i += 65_536) out.push(Buffer.from(body.subarray(i, i + 65_536)));
  return out;
}

function heapAfterGc(): number {
  for (let i = 0; i < 3; i++) globalThis.gc!();
  return process.memoryUsage().heapUsed;
}

/** The body's text as the rescue makes it: decoded chunk by chunk. */
function textOf(chunks: Buffer[]): string {
  const decoder = new StringDecoder('utf8');
  let text = '';
  for (const chunk of chunks) text += decoder.write(chunk);
  return text + decoder.end();
}

async function measure(name: string) {
  const chunks = chunked(SHAPES[name]());
  const before = heapAfterGc();
  const shape = await scanJson(chunks);
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const started = performance.now();
  // The reader the rescue uses, without the rescue's refusals: what parsing would cost.
  const json = await parseObject(textOf(chunks), MAX_COMPACTABLE_DEPTH);
  const readMs = performance.now() - started;
  await new Promise((resolve) => setTimeout(resolve, 20));
  delay.disable();
  const held = heapAfterGc() - before;
  const estimate = rescueHeapCost(shape);
  const mb = (n: number) => +(n / 2 ** 20).toFixed(1);
  console.log(
    JSON.stringify({
      name,
      bodyMb: mb(shape.bytes),
      parsed: json !== null,
      heldMb: mb(held),
      heldPerByte: +(held / shape.bytes).toFixed(2),
      estimateMb: mb(estimate),
      estimateOverHeld: +(estimate / held).toFixed(2),
      rescued: shape.largestPiece <= MAX_PIECE_TOKENS,
      readMs: Math.round(readMs),
      longestStallMs: Math.round(delay.max / 1e6),
      shape,
    }),
  );
}

const one = process.argv.indexOf('--one');
if (one > 0) {
  await measure(process.argv[one + 1]);
} else {
  const asked = process.argv.slice(2);
  const self = fileURLToPath(import.meta.url);
  for (const name of Object.keys(SHAPES).filter((n) => asked.length === 0 || asked.some((a) => n.includes(a)))) {
    const out = execFileSync(process.execPath, ['--expose-gc', '--max-old-space-size=4096', '--import', 'tsx', self, '--one', name], {
      encoding: 'utf8',
    });
    process.stdout.write(out);
  }
}
