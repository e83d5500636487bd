import pino from 'pino';
import { Agent } from 'undici';
import { afterEach, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { tenantOf } from '../../src/memory/fingerprint.js';
import { createMemory, type CompactionMemory } from '../../src/memory/index.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { serve } from '../../src/rescue/index.js';
import { readIncoming } from '../../src/rescue/request.js';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { rescueContext } from '../helpers/rescue-context.js';
import { isSummarizer, parseCompactionHeader, toolTurnsBody } from '../helpers/rescue.js';

/*
 * A proactive compaction aims at the smaller of what the remembered compaction aimed at and what
 * a limit learned since says to aim at (src/rescue/proactive.ts, proactiveTarget). The conversation has
 * many small turns and keepRecent is high, so the kept tail grows until the aim stops it: the aim
 * shows in how much of the tail the request sent ahead keeps.
 */

let upstream: FakeUpstream;
const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
  await upstream?.close();
});

const calls = () => upstream.received.filter((r) => !isSummarizer(r));
const TENANT = { authorization: 'Bearer sk-client' };
// Masking off: what is measured is the tail a summary keeps (100-byte outputs would stay as they are anyway).
const CONFIG: ConfigInput = { memory: { enabled: true }, compaction: { keepRecent: 1000, mask: false } };

/** `turns` tool calls with 100-byte outputs, then a last question. */
function smallTurns(turns: number) {
  return toolTurnsBody(turns, (t) => `// file ${t}\n${'x'.repeat(90)}`);
}

async function run(body: unknown, memory: CompactionMemory) {
  const config = validateConfig({ upstream: { url: upstream.baseUrl }, summarizer: { maxInputTokens: 500_000 }, ...CONFIG });
  const dispatcher = new Agent();
  agents.push(dispatcher);
  const ctx = rescueContext({
    config,
    dispatcher,
    memory,
    incoming: readIncoming(Buffer.from(JSON.stringify(body)), undefined),
    headers: TENANT,
    clientHeaders: TENANT,
  });
  const outcome = await serve(ctx, () => false);
  for await (const _ of outcome.answer.response.body);
  return outcome.header ? parseCompactionHeader(outcome.header) : undefined;
}

it('a limit learned since a span was remembered lowers the aim of the compaction ahead, not only what must fit', async () => {
  // Bodies over 16,000 bytes are refused with a stated window (4 bytes a token), the summarizer
  // answers a short summary: the first turn is compacted after a rejection and remembered, with
  // a fit of 90% of the window (14,400 bytes) and an aim of half of it (8,000 bytes).
  upstream = await startFakeUpstream((req, res) => {
    if (isSummarizer(req)) return json(res, 200, completion('SUMMARY: files read.'));
    if (req.body.length > 16_000) {
      const message = `This model's maximum context length is 4000 tokens. However, your messages resulted in ${Math.ceil(req.body.length / 4)} tokens. Please reduce the length of the messages.`;
      return json(res, 400, { error: { message, type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } });
    }
    return json(res, 200, completion('done'));
  });
  const memory = createMemory(
    validateConfig({ upstream: { url: upstream.baseUrl }, memory: { enabled: true } }),
    createMetrics(),
    pino({ level: 'silent' }),
  )!;
  const first = await run(smallTurns(100), memory);
  expect(first).toMatchObject({ outcome: 'replayed', trigger: 'rejected' });

  // Learned since: a window of 2,500 tokens at 4 bytes: fit 9,000 bytes, aim 5,000 bytes, both
  // under what was remembered. The next turn, 100 turns longer, is compacted ahead at that aim.
  await memory.learn({ tenant: tenantOf(TENANT)!, upstream: upstream.baseUrl, api: 'chat', model: 'fake-model' }, { limitTokens: 2500 });
  const body = smallTurns(200);
  const next = await run(body, memory);
  expect(next).toMatchObject({ outcome: 'compacted', trigger: 'proactive', limit: 'learned' });
  expect(calls()).toHaveLength(3);
  const ahead = calls()[2];
  // Aiming at the remembered 8,000 bytes would keep 19 items of the tail (22 messages, 4,965
  // bytes). The remembered summary ends with its trail, which the plan counts as kept.
  expect(ahead.body.length).toBeLessThanOrEqual(5_000);
  expect(ahead.json.messages).toHaveLength(10);
  expect(ahead.json.messages.slice(0, 2)).toEqual(body.messages.slice(0, 2));
  expect(ahead.json.messages[2].content).toMatch(
    /^\[compaction-gateway\] The 394 earlier messages .*SUMMARY: files read\.\n\n\[trail of the condensed messages, read off them by the gateway\]\nfiles read: .*, src\/f196\.ts$/s,
  );
  expect(ahead.json.messages.slice(3)).toEqual(body.messages.slice(-7));
  expect(ahead.json.messages[3].tool_calls[0].function.arguments).toBe('{"path":"src/f197.ts"}');
  await memory.close();
});
