import OpenAI from 'openai';
import { afterEach, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { LOST_TASK_ANSWER, type OllamaStandIn } from '../helpers/strict-ollama.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * The status page's record of the decisions windows bring (docs/windows.md), against the strict
 * Ollama stand-in that cuts a long prompt and answers 200: a streamed answer the upstream cut,
 * which reached the client as it was, then the next turn made to fit the window the cut showed.
 */

const MODEL = 'qwen3:8b';
const NUM_CTX = 4_096;
const TOOLS = [
  {
    type: 'function' as const,
    function: {
      name: 'read_file',
      description: 'Read a file',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    },
  },
];

let ollama: OllamaStandIn;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await ollama.close();
});

/** A streamed turn through the gateway: the tool call the model made, or none (it lost its task). */
async function turn(client: OpenAI, messages: any[]) {
  const { data, response } = await client.chat.completions
    .create({ model: MODEL, messages, tools: TOOLS, stream: true, stream_options: { include_usage: true } })
    .withResponse();
  let call: any;
  for await (const chunk of data) {
    const c = chunk.choices[0]?.delta?.tool_calls?.[0];
    if (c?.id) call = { id: c.id, type: 'function', function: { name: c.function?.name, arguments: c.function?.arguments ?? '' } };
  }
  return { call, header: response.headers.get('x-gateway-compaction') };
}

it('lists the cut stream, relayed as it was, and the next turn made to fit the window it showed', async () => {
  ollama = await startStandIn({
    provider: 'ollama',
    numCtx: NUM_CTX,
    tokenDelayMs: 5,
    reply: (n, req, seen) =>
      req.headers['x-gateway-compaction'] === 'summarizer'
        ? { text: `Summary ${n}: the user asked to fix the replay test.` }
        : seen.taskKept
          ? { text: `Reading file ${n}.`, call: { id: `call_${n}`, name: 'read_file', args: { path: `src/file${n}.ts` } } }
          : { text: LOST_TASK_ANSWER },
  });
  gateway = await startGateway({ upstream: { url: ollama.baseUrl } });
  const client = new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'sk-local', maxRetries: 0 });
  const messages: any[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Fix the failing test in test/flows/replay.test.ts.' },
  ];
  let lost = false;
  for (let t = 1; t <= 10 && !lost; t++) {
    const { call } = await turn(client, messages);
    if (!call) lost = true;
    else
      messages.push(
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: call.id, content: `// file ${t}\n`.repeat(300) },
      );
  }
  expect(lost).toBe(true);
  const status = async () => (await (await fetch(`${gateway.origin}/status.json`)).json()) as any;
  // The cut is judged when the relayed stream has ended.
  await expect.poll(async () => (await status()).recent.entries.length, { timeout: 5_000 }).toBe(1);
  const [cut] = (await status()).recent.entries;
  expect(cut).toMatchObject({
    upstream: 'default',
    api: 'chat',
    model: MODEL,
    trigger: 'truncated',
    outcome: 'relayed',
    limit: 'observed',
  });
  expect(cut.windowTokens).toBeLessThanOrEqual(NUM_CTX);
  expect(cut.after.tokens).toBe(cut.windowTokens);
  expect(cut.before.tokens).toBeGreaterThan(cut.after.tokens);
  expect(cut.before.bytes).toBe(ollama.chatCalls().at(-1)!.received.body.length);

  // The agent asks again: made to fit before it is sent.
  const again = await turn(client, messages.slice(0, -1));
  expect(again.header).toMatch(/^outcome=compacted, trigger=window, reason=context_length, limit=observed/);
  const doc = await status();
  expect(doc.recent.entries[0]).toMatchObject({
    trigger: 'window',
    outcome: 'compacted',
    limit: 'observed',
    windowTokens: cut.windowTokens,
    model: MODEL,
  });
  expect(doc.recent.entries[0].after.tokens).toBeLessThan(cut.windowTokens);
  expect(doc.totals).toEqual([
    expect.objectContaining({ upstream: 'default', api: 'chat', truncated: 1, ahead: 1, refused: 0, rescued: 0 }),
  ]);
  expect(doc.upstreams[0].windows.learned).toEqual([expect.objectContaining({ model: MODEL, observed: cut.windowTokens })]);
});

it('lists a request over its declared window that nothing could shrink, sent as it was', async () => {
  ollama = await startStandIn({ provider: 'ollama', numCtx: 32_768 });
  gateway = await startGateway({
    upstream: { url: ollama.baseUrl, windows: [{ model: 'qwen3*', tokens: 2_048, completionCounted: false }] },
  });
  const client = new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'sk-local', maxRetries: 0 });
  // One input, nothing before it to condense.
  const { response } = await client.chat.completions
    .create({ model: MODEL, messages: [{ role: 'user', content: 'Explain this file.\n' + 'const a = 1;\n'.repeat(1_000) }] })
    .withResponse();
  expect(response.status).toBe(200);
  expect(response.headers.get('x-gateway-compaction')).toBeNull();
  const doc = (await (await fetch(`${gateway.origin}/status.json`)).json()) as any;
  expect(doc.recent.entries).toEqual([
    expect.objectContaining({ trigger: 'window', outcome: 'not_shrunk', limit: 'declared', windowTokens: 2_048, model: MODEL }),
  ]);
  expect(doc.recent.entries[0]).toMatchObject({ why: 'nothing_to_shrink', before: { items: 1 } });
  expect(doc.totals).toEqual([expect.objectContaining({ requests: 1, failed: { not_shrunk: 1 }, ahead: 0 })]);
  expect(doc.upstreams[0].windows.declared).toEqual([{ model: 'qwen3*', tokens: 2_048, completionCounted: false }]);
});
