import v8 from 'node:v8';
import { importDist } from './dist.js';
import { bigAgentRequest } from './requests.js';
import { median } from './stats.js';

/*
 * The rescue path's pure part in a fresh process started with --expose-gc: plan and compact the
 * 7 MB, 2,000-message agent conversation with the deterministic fallback (no network), the
 * way the route calls it after a 400 context_length_exceeded from a 128k-token model. The
 * compaction code is the built dist/, as in production.
 */

export interface CompactResult {
  bodyBytes: number;
  messages: number;
  messagesAfter: number;
  bytesAfter: number;
  runs: number;
  medianMs: number;
  minMs: number;
  /** The parse of the body, which the rescue path does before it can compact. */
  parseMedianMs: number;
  /** Highest heap use during one compaction above the heap in use before it (garbage included). */
  peakExtraHeapBytes: number;
  /** Everything one compaction allocated on the heap. */
  allocatedBytes: number;
}

const { compact } = await importDist<typeof import('../src/compaction/index.js')>('compaction/index');
const { sizeTarget } = await importDist<typeof import('../src/compaction/size-target.js')>('compaction/size-target');
const { chat } = await importDist<typeof import('../src/dialects/chat.js')>('dialects/chat');
const { validateConfig } = await importDist<typeof import('../src/config/load.js')>('config/load');
const { parseObject } = await importDist<typeof import('../src/lib/json-source.js')>('lib/json-source');
const { MAX_COMPACTABLE_DEPTH } = await importDist<typeof import('../src/rescue/request.js')>('rescue/request');

const { runs, warmups } = JSON.parse(process.argv[2] ?? '{}') as { runs: number; warmups: number };
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');

const original = bigAgentRequest();
const body = Buffer.from(JSON.stringify(original));
const config = validateConfig({ compaction: { strategy: 'fallback' } });
// What the classifier reads off the provider's error: a 128k window, the prompt's token count.
const rejection = {
  reason: 'context_length' as const,
  limits: { limitTokens: 128_000, promptTokens: Math.ceil(body.length / 4) },
  bodyBytes: body.length,
  requested: chat.completion(original),
};
const settings = {
  target: sizeTarget(rejection, undefined, config.compaction.targetRatio),
  because: "the request exceeded the model's context window",
  compaction: config.compaction,
  summary: config.summarizer,
  deadline: new AbortController().signal,
};
// The fallback asks no summarizer: one that is never called.
const summarizer = { wire: chat.summarizer, model: 'fake-model', send: () => Promise.reject(new Error('the fallback asks no summarizer')) };

/** What the rescue hands to compact(): the request and the conversation the dialect reads from it. */
function input(request: Record<string, unknown>) {
  const conversation = chat.read(request);
  if (!conversation) throw new Error('the bench request has no conversation');
  return [{ dialect: chat, bodyBytes: body.length, request, conversation }, settings, summarizer] as const;
}

/**
 * Each compaction gets the request freshly parsed, as the route does (piece by piece, each
 * message remembering its source text, which is what the compaction measures it by): nothing
 * carries over between runs.
 */
async function parsed(): Promise<{ request: Record<string, unknown>; ms: number }> {
  const started = performance.now();
  const request = await parseObject(body.toString('utf8'), MAX_COMPACTABLE_DEPTH);
  if (request === null || typeof request !== 'object') throw new Error('the bench request did not parse');
  return { request, ms: performance.now() - started };
}

for (let i = 0; i < warmups; i++) await compact(...input((await parsed()).request));
const times: number[] = [];
const parses: number[] = [];
let last;
for (let i = 0; i < runs; i++) {
  const { request, ms } = await parsed();
  parses.push(ms);
  gc();
  const started = performance.now();
  last = await compact(...input(request));
  times.push(performance.now() - started);
}
if (last?.outcome !== 'compacted') throw new Error(`compaction did not compact: ${JSON.stringify(last)}`);

const memory = [];
for (let i = 0; i < 3; i++) memory.push(await measureMemory());
const result: CompactResult = {
  bodyBytes: body.length,
  messages: (original.messages as unknown[]).length,
  messagesAfter: last.messagesAfter,
  bytesAfter: last.bytesAfter,
  runs,
  medianMs: median(times),
  minMs: Math.min(...times),
  parseMedianMs: median(parses),
  peakExtraHeapBytes: median(memory.map((m) => m.peak)),
  allocatedBytes: median(memory.map((m) => m.allocated)),
};
process.send!({ type: 'result', result }, () => process.exit(0));

/** Heap figures of one compaction, read from V8's own record of every GC that ran during it. */
async function measureMemory(): Promise<{ peak: number; allocated: number }> {
  const { request } = await parsed();
  gc!();
  const before = v8.getHeapStatistics().used_heap_size;
  const profiler = new v8.GCProfiler();
  profiler.start();
  await compact(...input(request));
  const after = v8.getHeapStatistics().used_heap_size;
  const { statistics } = profiler.stop();
  let peak = after;
  let allocated = 0;
  let from = before;
  for (const gcEvent of statistics) {
    const used = gcEvent.beforeGC.heapStatistics.usedHeapSize;
    peak = Math.max(peak, used);
    allocated += used - from;
    from = gcEvent.afterGC.heapStatistics.usedHeapSize;
  }
  allocated += after - from;
  return { peak: peak - before, allocated };
}
