import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { headerOf } from '../scenarios/apis/fixture.js';
import { startFakeUpstream, json, completion, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { sample } from '../helpers/hostile-child.js';
import { LOST_TASK_ANSWER, promptTokensOf, type OllamaStandIn } from '../helpers/strict-ollama.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * When the upstream says nothing (docs/windows.md): a local server that cuts a long prompt and
 * answers 200 (Ollama), and servers that state their window (llama.cpp's /props, vLLM's model
 * card). An agent's session grows turn by turn through the gateway, with the OpenAI SDK, against
 * the strict stand-ins; what the agent would notice is whether its model kept its task.
 */

const MODEL = 'qwen3:8b';
const TASK = 'Fix the failing test in test/flows/replay.test.ts and run the suite.';
const KEY = 'sk-local-agent';

let upstream: FakeUpstream | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
  gateway = upstream = undefined;
});

const summarizing = (headers: Record<string, unknown>) => headers['x-gateway-compaction'] === 'summarizer';

/** The model keeps working while it has its task: a tool call per turn; without it, the plain text Ollama's stand-in says. */
function agentReply(n: number, req: { headers: Record<string, unknown> }, seen: { taskKept: boolean }) {
  if (summarizing(req.headers))
    return { text: `Summary ${n}: the user asked to fix the failing replay test; files read so far are listed.` };
  return seen.taskKept
    ? { text: `Reading file ${n}.`, call: { id: `call_${n}`, name: 'read_file', args: { path: `src/file${n}.ts` } } }
    : { text: LOST_TASK_ANSWER };
}

/** An agent's session: its system prompt, its task, then a tool round per turn whose output is `outputBytes` of text. */
class Session {
  readonly messages: any[] = [
    { role: 'system', content: 'You are a coding agent. Use the tools to read and change files.' },
    { role: 'user', content: TASK },
  ];
  private turn = 0;
  constructor(private readonly outputBytes: number) {}

  /** The next tool round, answered: the call the model made and the output the agent's tool gave. */
  answered(message: OpenAI.Chat.ChatCompletionMessage): void {
    this.turn++;
    const call = message.tool_calls?.[0];
    if (!call || call.type !== 'function') throw new Error(`turn ${this.turn}: the model answered without a tool call: ${message.content}`);
    this.messages.push({ role: 'assistant', content: message.content ?? null, tool_calls: message.tool_calls });
    const line = `// ${call.function.name} ${this.turn}: the contents of the file, one line after another\n`;
    this.messages.push({
      role: 'tool',
      tool_call_id: call.id,
      content: line.repeat(Math.ceil(this.outputBytes / line.length)).slice(0, this.outputBytes),
    });
  }

  tokens(): number {
    return promptTokensOf(this.messages, TOOLS);
  }
}

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

function sdk(g: TestGateway): OpenAI {
  return new OpenAI({ baseURL: g.baseUrl, apiKey: KEY, maxRetries: 0 });
}

async function post(client: OpenAI, session: Session, stream = false) {
  if (!stream) {
    const { data, response } = await client.chat.completions
      .create({ model: MODEL, messages: session.messages, tools: TOOLS })
      .withResponse();
    return { message: data.choices[0].message, header: headerOf(response.headers.get('x-gateway-compaction')) };
  }
  const { data, response } = await client.chat.completions
    .create({ model: MODEL, messages: session.messages, tools: TOOLS, stream: true, stream_options: { include_usage: true } })
    .withResponse();
  let content = '';
  const calls: any[] = [];
  for await (const chunk of data) {
    const delta = chunk.choices[0]?.delta;
    if (delta?.content) content += delta.content;
    for (const c of delta?.tool_calls ?? [])
      calls[c.index] = { id: c.id, type: 'function', function: { name: c.function?.name, arguments: c.function?.arguments ?? '' } };
  }
  const message = {
    role: 'assistant',
    content,
    refusal: null,
    tool_calls: calls.length > 0 ? calls : undefined,
  } as OpenAI.Chat.ChatCompletionMessage;
  return { message, header: headerOf(response.headers.get('x-gateway-compaction')) };
}

const modelCalls = (ollama: OllamaStandIn) => ollama.chatCalls().filter((c) => !summarizing(c.received.headers));

async function metricsOf(g: TestGateway): Promise<string> {
  return (await fetch(`${g.origin}/metrics`)).text();
}

describe('Ollama, which cuts a long prompt and answers 200', () => {
  // A window between the 7th and the 8th request of a session of 2 KB tool outputs.
  const NUM_CTX = 4_096;

  it('without the gateway, the session loses its task at the request that passes the window', async () => {
    const ollama = await startStandIn({ provider: 'ollama', numCtx: NUM_CTX, reply: agentReply });
    upstream = ollama;
    const client = new OpenAI({ baseURL: ollama.baseUrl, apiKey: KEY, maxRetries: 0 });
    const session = new Session(2_000);
    let lost = 0;
    for (let t = 1; t <= 12 && lost === 0; t++) {
      const { message } = await post(client, session);
      if (!message.tool_calls) lost = t;
      else session.answered(message);
    }
    expect(lost).toBeGreaterThanOrEqual(7);
    expect(lost).toBeLessThanOrEqual(9);
    expect(modelCalls(ollama).at(-1)).toMatchObject({ truncated: true, taskKept: false, status: 200 });
  });

  it('through the gateway, the window is discovered on the first request and no request is ever cut', async () => {
    const ollama = await startStandIn({ provider: 'ollama', numCtx: NUM_CTX, reply: agentReply });
    upstream = ollama;
    gateway = await startGateway({ upstream: { url: ollama.baseUrl, discoverWindows: true } });
    const client = sdk(gateway);
    const session = new Session(2_000);
    const headers: Array<Record<string, string | number> | null> = [];
    for (let t = 1; t <= 16; t++) {
      const { message, header } = await post(client, session, t % 2 === 0);
      headers.push(header);
      session.answered(message);
    }
    // The agent's own history passed the window three times over; the model never lost its task.
    expect(session.tokens()).toBeGreaterThan(2 * NUM_CTX);
    expect(modelCalls(ollama).map((c) => c.truncated)).toEqual(modelCalls(ollama).map(() => false));
    for (const call of ollama.chatCalls()) expect(call.keptTokens).toBeLessThanOrEqual(NUM_CTX);
    expect(ollama.truncations()).toEqual([]);
    // It asked which server this is, and then the loaded model's window, with the request's own key.
    const asked = ollama.discoveryCalls().map((r) => `${r.method} ${r.url}`);
    expect(asked).toContain('GET /api/version');
    expect(asked).toContain('GET /api/ps');
    for (const r of ollama.discoveryCalls()) {
      expect(r.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(r.headers['x-gateway-compaction']).toBe('discovery');
    }
    expect(gateway.logText()).toContain(`runs ${MODEL} with a context window of ${NUM_CTX} tokens (ollama /api/ps)`);
    const ahead = headers.filter((h) => h?.trigger === 'window');
    expect(ahead.length).toBeGreaterThan(0);
    expect(ahead[0]).toMatchObject({ outcome: 'compacted', reason: 'context_length', limit: 'discovered', window: NUM_CTX });
    const metrics = await metricsOf(gateway);
    expect(sample(metrics, 'gateway_truncations_total', { api: 'chat', upstream: 'default', stage: 'held' })).toBe(0);
    expect(sample(metrics, 'gateway_truncations_total', { api: 'chat', upstream: 'default', stage: 'streamed' })).toBe(0);
    expect(sample(metrics, 'gateway_window_compactions_total', { api: 'chat', upstream: 'default', source: 'discovered' })).toBeGreaterThan(
      0,
    );
  });

  it('discovery off: the first cut of a held answer is caught before the client sees it and replayed within what the server kept', async () => {
    const ollama = await startStandIn({ provider: 'ollama', numCtx: NUM_CTX, reply: agentReply });
    upstream = ollama;
    gateway = await startGateway({ upstream: { url: ollama.baseUrl } });
    const client = sdk(gateway);
    const session = new Session(3_000);
    let caught: Record<string, string | number> | null = null;
    for (let t = 1; t <= 10 && !caught; t++) {
      const { message, header } = await post(client, session);
      if (header?.trigger === 'truncated') caught = header;
      session.answered(message);
    }
    expect(caught).toMatchObject({
      outcome: 'replayed',
      trigger: 'truncated',
      reason: 'context_length',
      limit: 'observed',
      'replay-status': 200,
    });
    expect(Number(caught!.window)).toBeLessThanOrEqual(NUM_CTX);
    // The cut answer went nowhere: the replay's did, and the model had its task.
    const calls = modelCalls(ollama);
    const cut = calls.findIndex((c) => c.truncated);
    expect(cut).toBeGreaterThan(0);
    expect(calls[cut].taskKept).toBe(false);
    expect(calls[cut + 1]).toMatchObject({ truncated: false, status: 200 });
    expect(calls.slice(cut + 1).every((c) => !c.truncated)).toBe(true);
    const metrics = await metricsOf(gateway);
    expect(sample(metrics, 'gateway_truncations_total', { api: 'chat', upstream: 'default', stage: 'held' })).toBe(1);
    // Discovery was off: nothing but chat calls reached the server.
    expect(ollama.discoveryCalls()).toEqual([]);
  });

  it('discovery off, streamed: the cut stream goes to the client as it came, is counted and logged, and the next turn is made to fit', async () => {
    const ollama = await startStandIn({ provider: 'ollama', numCtx: NUM_CTX, reply: agentReply, tokenDelayMs: 20 });
    upstream = ollama;
    gateway = await startGateway({ upstream: { url: ollama.baseUrl } });
    const client = sdk(gateway);
    const session = new Session(3_000);
    let cutAt = 0;
    for (let t = 1; t <= 10 && cutAt === 0; t++) {
      const { message } = await post(client, session, true);
      if (!message.tool_calls) cutAt = t;
      else session.answered(message);
    }
    // The stream was already the client's: it saw the model without its task.
    expect(cutAt).toBeGreaterThan(1);
    expect(modelCalls(ollama).at(-1)).toMatchObject({ truncated: true });
    await expect
      .poll(async () =>
        sample(await metricsOf(gateway!), 'gateway_truncations_total', { api: 'chat', upstream: 'default', stage: 'streamed' }),
      )
      .toBe(1);
    const warned = gateway.logLines().find((l) => l.truncation);
    expect(warned).toMatchObject({ level: 40, truncation: { api: 'chat', model: MODEL } });
    expect(warned.truncation.reportedTokens).toBeLessThanOrEqual(NUM_CTX);
    expect(warned.truncation.expectedTokens).toBeGreaterThan(warned.truncation.reportedTokens);
    // The agent tries again (as an agent whose model lost its way would be told to): made to fit, nothing cut.
    const again = await post(client, session, true);
    expect(again.header).toMatchObject({ outcome: 'compacted', trigger: 'window', limit: 'observed' });
    expect(again.message.tool_calls).toBeDefined();
    expect(modelCalls(ollama).at(-1)).toMatchObject({ truncated: false, taskKept: true });
  });

  it('a request far below any window is sent and answered as it came, and its answer is not held', async () => {
    const ollama = await startStandIn({ provider: 'ollama', numCtx: NUM_CTX, reply: agentReply });
    upstream = ollama;
    gateway = await startGateway({ upstream: { url: ollama.baseUrl, discoverWindows: true } });
    const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
    const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-gateway-compaction')).toBeNull();
    expect(ollama.chatCalls()[0].received.body.toString()).toBe(body);
    // Too small for a window to matter: no discovery either.
    expect(ollama.discoveryCalls()).toEqual([]);
  });
});

describe('servers that state their window', () => {
  it('llama.cpp: n_ctx from /props, and a session that passes it is never refused', async () => {
    const llama = await startStandIn({
      provider: 'llamacpp',
      nCtx: 4_096,
      model: MODEL,
      reply: (n) => ({ text: `Reading file ${n}.`, call: { id: `call_${n}`, name: 'read_file', args: { path: `src/file${n}.ts` } } }),
    });
    upstream = llama;
    gateway = await startGateway({ upstream: { url: llama.baseUrl, discoverWindows: true } });
    const client = sdk(gateway);
    const session = new Session(2_000);
    for (let t = 1; t <= 14; t++) session.answered((await post(client, session)).message);
    expect(session.tokens()).toBeGreaterThan(4_096 * 1.5);
    expect(llama.refusals()).toEqual([]);
    expect(llama.discoveryCalls().map((r) => r.url)).toContain('/props');
    expect(gateway.logText()).toContain('with a context window of 4096 tokens (llama.cpp /props)');
  });

  it('vLLM: max_model_len from its model card, and a session that passes it is never refused', async () => {
    const vllm = await startStandIn({
      provider: 'windowed',
      window: 4_096,
      model: MODEL,
      reply: (n) => ({ text: `Reading file ${n}.`, call: { id: `call_${n}`, name: 'read_file', args: { path: `src/file${n}.ts` } } }),
    });
    upstream = vllm;
    gateway = await startGateway({ upstream: { url: vllm.baseUrl, discoverWindows: true } });
    const client = sdk(gateway);
    const session = new Session(2_000);
    for (let t = 1; t <= 14; t++) session.answered((await post(client, session)).message);
    expect(session.tokens()).toBeGreaterThan(4_096 * 1.5);
    expect(vllm.refusals()).toEqual([]);
    expect(gateway.logText()).toContain('with a context window of 4096 tokens (max_model_len)');
  });
});

describe('discovery', () => {
  it('never delays a request: an upstream that never answers it still answers the request', async () => {
    let held = 0;
    upstream = await startFakeUpstream((req, res) => {
      if (req.method === 'GET') return void held++;
      json(res, 200, {
        ...completion('answered'),
        usage: { prompt_tokens: Math.ceil(req.body.length / 4), completion_tokens: 1, total_tokens: 1 },
      });
    });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl, discoverWindows: true } });
    const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x'.repeat(8_000) }] });
    const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).choices[0].message.content).toBe('answered');
    // Its question is still unanswered when the answer reached the client.
    expect(held).toBe(1);
    expect(upstream.received.map((r) => `${r.method} ${r.url}`).sort()).toEqual(['GET /api/version', 'POST /v1/chat/completions']);
  });

  it("carries the gateway's own key when it has one, and no header of the client's but credentials", async () => {
    const ollama = await startStandIn({ provider: 'ollama', numCtx: 4_096 });
    upstream = ollama;
    gateway = await startGateway({ upstream: { url: ollama.baseUrl, apiKey: 'sk-gateway-own', discoverWindows: true } });
    const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'y'.repeat(8_000) }] });
    await fetch(`${gateway.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: 'Bearer sk-client',
        cookie: 'session=secret',
        'x-client-note': 'private',
      },
      body,
    });
    await expect.poll(() => ollama.discoveryCalls().length).toBeGreaterThan(0);
    for (const r of ollama.discoveryCalls()) {
      expect(r.headers.authorization).toBe('Bearer sk-gateway-own');
      expect(r.headers.cookie).toBeUndefined();
      expect(r.headers['x-client-note']).toBeUndefined();
      expect(r.body.toString()).not.toContain('yyyy');
    }
  });
});
