import { afterEach, describe, expect, it } from 'vitest';
import type { Received } from '../helpers/fake-upstream.js';
import { LOST_TASK_ANSWER, promptTokensOf, type OllamaOptions, type OllamaSeen, type OllamaStandIn } from '../helpers/strict-ollama.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * The Ollama stand-in behaves as Ollama v0.33 does (server/routes.go, server/prompt.go,
 * llm/llama_server.go, openai/openai.go): it discovers as Ollama does (the trained length in
 * /api/show's model_info, num_ctx only from a Modelfile, /api/ps only once a model is loaded) and
 * never refuses an overlong prompt: it drops whole messages, oldest first, then cuts tokens, and
 * answers 200 with usage.prompt_tokens the tokens it kept. Expected values are written out here,
 * apart from the stand-in's own code.
 */

let ollama: OllamaStandIn;
afterEach(async () => ollama?.close());

const seen: OllamaSeen[] = [];
async function start(options: Partial<OllamaOptions> = {}) {
  seen.length = 0;
  ollama = await startStandIn({
    provider: 'ollama',
    numCtx: 4096,
    reply: (_n: number, _req: Received, s: OllamaSeen) => {
      seen.push(s);
      return { text: s.taskKept ? 'ok' : LOST_TASK_ANSWER };
    },
    ...options,
  });
  return ollama;
}

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${ollama.origin}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

const SYSTEM = { role: 'system', content: 'You are a coding agent. Use the tools.' };
const TASK = { role: 'user', content: 'Fix the failing build in src/ and run the tests.' };
const filler = (role: string, k: number) => ({ role, content: `${role} step ${k}: ${'x'.repeat(196)}` });

describe('discovery', () => {
  it('/api/show: the trained length in model_info, and no num_ctx without a Modelfile PARAMETER', async () => {
    await start();
    const show = await call('POST', '/api/show', { model: 'qwen3:8b' });
    expect(show.status).toBe(200);
    expect(show.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(show.json.model_info['qwen3.context_length']).toBe(40960);
    expect(show.json.model_info['general.architecture']).toBe('qwen3');
    expect(show.json.parameters).not.toMatch(/num_ctx/);
    expect(show.json.parameters.split('\n')).toContain('temperature                    0.6');
    // Go's encoder writes <, > as \u003c, \u003e.
    expect(show.text).toContain('stop                           \\"\\u003c|im_start|\\u003e\\"');
    expect(show.json.capabilities).toEqual(['completion', 'tools', 'thinking']);
    // The deprecated `name` field is read too.
    expect((await call('POST', '/api/show', { name: 'qwen3:8b' })).status).toBe(200);
  });

  it('/api/show with a Modelfile num_ctx lists it in parameters (and the trained length stays apart)', async () => {
    await start({ modelfileNumCtx: 8192 });
    const show = await call('POST', '/api/show', { model: 'qwen3:8b' });
    expect(show.json.parameters.split('\n')).toContain('num_ctx                        8192');
    expect(show.json.modelfile).toContain('PARAMETER num_ctx 8192');
    expect(show.json.model_info['qwen3.context_length']).toBe(40960);
  });

  it("/api/show: an unknown model is Ollama's 404, a GET is gin's 405 with Allow", async () => {
    await start();
    const missing = await call('POST', '/api/show', { model: 'llama3' });
    expect(missing.status).toBe(404);
    expect(missing.text).toBe('{"error":"model \'llama3:latest\' not found"}');
    expect((await call('POST', '/api/show', {})).json).toEqual({ error: 'model is required' });
    const get = await call('GET', '/api/show');
    expect(get.status).toBe(405);
    expect(get.text).toBe('405 method not allowed');
    expect(get.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(get.headers.get('allow')).toBe('POST');
    const unknown = await call('GET', '/api/nothing');
    expect([unknown.status, unknown.text]).toEqual([404, '404 page not found']);
  });

  it('/api/ps is empty until a request loads the model, then lists it with its context_length', async () => {
    await start({ numCtx: 8192 });
    expect((await call('GET', '/api/ps')).text).toBe('{"models":[]}');
    await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages: [TASK] });
    const ps = (await call('GET', '/api/ps')).json;
    expect(ps.models).toHaveLength(1);
    const [m] = ps.models;
    expect(Object.keys(m)).toEqual(['name', 'model', 'size', 'digest', 'details', 'expires_at', 'size_vram', 'context_length']);
    expect(m).toMatchObject({ name: 'qwen3:8b', model: 'qwen3:8b', context_length: 8192 });
    expect(m.details).toEqual({
      parent_model: '',
      format: 'gguf',
      family: 'qwen3',
      families: ['qwen3'],
      parameter_size: '8.2B',
      quantization_level: 'Q4_K_M',
    });
    expect(Date.parse(m.expires_at)).toBeGreaterThan(Date.now());
  });

  it('a Modelfile num_ctx is what the model runs with; an operator restart unloads it', async () => {
    await start({ numCtx: 4096, modelfileNumCtx: 2048 });
    await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages: [TASK] });
    expect((await call('GET', '/api/ps')).json.models[0].context_length).toBe(2048);
    await ollama.close();
    await start({ numCtx: 4096 });
    await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages: [TASK] });
    ollama.setNumCtx(16384);
    expect((await call('GET', '/api/ps')).json.models).toEqual([]);
    await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages: [TASK] });
    expect((await call('GET', '/api/ps')).json.models[0].context_length).toBe(16384);
  });

  it('/api/tags (the trained length as details.context_length), /api/version and /v1/models (no context length)', async () => {
    await start({ models: ['qwen3:8b', 'gemma3'] });
    const tags = (await call('GET', '/api/tags')).json;
    expect(tags.models.map((m: any) => m.name)).toEqual(['qwen3:8b', 'gemma3:latest']);
    expect(tags.models[0].details.context_length).toBe(40960);
    expect((await call('GET', '/api/version')).json).toEqual({ version: '0.33.0' });
    const models = await call('GET', '/v1/models');
    expect(models.headers.get('content-type')).toBe('application/json');
    expect(models.text.endsWith('}\n')).toBe(true);
    expect(models.json.object).toBe('list');
    for (const card of models.json.data) expect(Object.keys(card)).toEqual(['id', 'object', 'created', 'owned_by']);
    expect(models.json.data[0]).toMatchObject({ id: 'qwen3:8b', object: 'model', owned_by: 'library' });
    expect(ollama.discoveryCalls().map((r) => r.url)).toEqual(['/api/tags', '/api/version', '/v1/models']);
  });
});

describe('truncation', () => {
  it('drops whole messages, the task first, keeping the system message and the last one; usage says what was kept', async () => {
    await start({ numCtx: 250 });
    const last = { role: 'user', content: 'Now run the tests again.' };
    const messages = [
      SYSTEM,
      TASK,
      filler('assistant', 1),
      filler('user', 2),
      filler('assistant', 3),
      filler('user', 4),
      filler('assistant', 5),
      last,
    ];
    const total = promptTokensOf(messages);
    expect(total).toBeGreaterThan(250);
    // Ollama's loop, written out: drop from the front until it fits, the system message kept.
    let dropped = 1;
    while (promptTokensOf([SYSTEM, ...messages.slice(1 + dropped)]) > 250) dropped++;
    const kept = promptTokensOf([SYSTEM, ...messages.slice(1 + dropped)]);
    const res = await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages, tools: [], options: { num_ctx: 100_000 } });
    expect(res.status).toBe(200);
    expect(res.json.usage.prompt_tokens).toBe(kept);
    expect(kept).toBeLessThanOrEqual(250);
    expect(res.json.choices[0]).toEqual({ index: 0, message: { role: 'assistant', content: LOST_TASK_ANSWER }, finish_reason: 'stop' });
    expect(res.json.system_fingerprint).toBe('fp_ollama');
    expect(seen[0].messages[0]).toEqual(SYSTEM);
    expect(seen[0].messages.at(-1)).toEqual(last);
    expect(seen[0].messages).not.toContainEqual(TASK);
    const [c] = ollama.chatCalls();
    expect(c).toMatchObject({
      promptTokens: total,
      keptTokens: kept,
      droppedMessages: dropped,
      truncated: true,
      taskKept: false,
      cut: null,
      numCtx: 250,
    });
    expect(ollama.truncations()).toEqual([]);
  });

  it('keeps the task when everything fits, and answers ok', async () => {
    await start({ numCtx: 4096 });
    const messages = [SYSTEM, TASK, filler('assistant', 1)];
    const res = await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages });
    expect(res.json.usage.prompt_tokens).toBe(promptTokensOf(messages));
    expect(res.json.choices[0].message.content).toBe('ok');
    expect(ollama.chatCalls()[0]).toMatchObject({ truncated: false, taskKept: true, droppedMessages: 0 });
  });

  it('cuts one message too long alone to num_keep + the newest tokens, about half of num_ctx, and logs it', async () => {
    await start({ numCtx: 1000 });
    const huge = { role: 'user', content: 'y'.repeat(8000) };
    const res = await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages: [huge] });
    expect(res.status).toBe(200);
    // 4 + 8000/4 = 2004 tokens; limit = 1000 - floor((1000 - 4) / 2) = 502.
    expect(res.json.usage.prompt_tokens).toBe(502);
    expect(ollama.truncations()).toEqual([
      'level=WARN source=llama_server.go:317 msg="truncating input prompt" limit=502 prompt=2004 keep=4 new=502',
    ]);
    expect(ollama.chatCalls()[0]).toMatchObject({
      promptTokens: 2004,
      keptTokens: 502,
      truncated: true,
      taskKept: false,
      cut: { limit: 502, prompt: 2004, keep: 4, new: 502 },
    });
    expect(res.json.choices[0].message.content).toBe(LOST_TASK_ANSWER);
  });

  it('cuts a prompt of exactly num_ctx tokens, which the message stage let through (limit num_ctx - 1)', async () => {
    await start({ numCtx: 1000 });
    const exact = { role: 'user', content: 'z'.repeat(3984) }; // 4 + 996 = 1000 tokens
    expect(promptTokensOf([exact])).toBe(1000);
    expect((await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages: [exact] })).json.usage.prompt_tokens).toBe(502);
    const under = { role: 'user', content: 'z'.repeat(3980) }; // 999 tokens
    expect((await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages: [under] })).json.usage.prompt_tokens).toBe(999);
    expect(ollama.truncations()).toHaveLength(1);
  });

  it("ignores a /v1 body's options.num_ctx, honours /api/chat's (and reloads the runner)", async () => {
    await start({ numCtx: 4096 });
    const messages = [{ role: 'user', content: 'w'.repeat(2000) }]; // 504 tokens
    const v1 = await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages, options: { num_ctx: 100 } });
    expect(v1.json.usage.prompt_tokens).toBe(504);
    const native = await call('POST', '/api/chat', { model: 'qwen3:8b', messages, stream: false, options: { num_ctx: 100 } });
    // limit = 100 - floor((100 - 4) / 2) = 52.
    expect(native.json.prompt_eval_count).toBe(52);
    expect((await call('GET', '/api/ps')).json.models[0].context_length).toBe(100);
    expect(ollama.chatCalls().map((c) => [c.api, c.numCtx])).toEqual([
      ['openai', 4096],
      ['native', 100],
    ]);
  });

  it('/api/chat with shift:false refuses instead of cutting; in native chat mode llama-server refuses', async () => {
    await start({ numCtx: 100 });
    const messages = [{ role: 'user', content: 'w'.repeat(2000) }];
    const noShift = await call('POST', '/api/chat', { model: 'qwen3:8b', messages, stream: false, shift: false });
    expect(noShift.status).toBe(400);
    expect(noShift.json.error).toMatch(/^the prompt is longer than the context length currently available to the model/);
    await ollama.close();
    await start({ numCtx: 100, chatMode: 'native' });
    const native = await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages });
    expect(native.status).toBe(400);
    expect(native.json.error.type).toBe('invalid_request_error');
    expect(JSON.parse(native.json.error.message).error).toMatchObject({
      type: 'exceed_context_size_error',
      n_prompt_tokens: 504,
      n_ctx: 100,
    });
  });
});

describe('answers', () => {
  const events = (text: string) =>
    text
      .split('\n\n')
      .filter(Boolean)
      .map((e) => e.replace(/^data: /, ''));

  it('streams the usage chunk only with stream_options.include_usage, as Ollama writes it', async () => {
    await start({ numCtx: 4096 });
    const body = { model: 'qwen3:8b', messages: [TASK], stream: true };
    const plain = await call('POST', '/v1/chat/completions', body);
    expect(plain.headers.get('content-type')).toBe('text/event-stream');
    const chunks = events(plain.text);
    expect(chunks.at(-1)).toBe('[DONE]');
    const parsed = chunks.slice(0, -1).map((c) => JSON.parse(c));
    expect(parsed.map((c) => c.choices[0]?.delta)).toEqual([{ role: 'assistant', content: 'ok' }, {}]);
    expect(parsed.at(-1).choices[0].finish_reason).toBe('stop');
    expect(parsed.some((c) => 'usage' in c)).toBe(false);
    const withUsage = events((await call('POST', '/v1/chat/completions', { ...body, stream_options: { include_usage: true } })).text)
      .slice(0, -1)
      .map((c) => JSON.parse(c));
    expect(withUsage.at(-1)).toMatchObject({
      object: 'chat.completion.chunk',
      system_fingerprint: 'fp_ollama',
      choices: [],
      usage: { prompt_tokens: promptTokensOf([TASK]) },
    });
  });

  it('/api/chat: NDJSON by default, one JSON with stream:false, prompt_eval_count the kept tokens', async () => {
    await start({ numCtx: 4096 });
    const streamed = await call('POST', '/api/chat', { model: 'qwen3:8b', messages: [TASK] });
    expect(streamed.headers.get('content-type')).toBe('application/x-ndjson');
    const lines = streamed.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.done)).toEqual([false, true]);
    expect(lines[0].message).toEqual({ role: 'assistant', content: 'ok' });
    expect(lines[1]).toMatchObject({ done_reason: 'stop', prompt_eval_count: promptTokensOf([TASK]) });
    const whole = await call('POST', '/api/chat', { model: 'qwen3:8b', messages: [TASK], stream: false });
    expect(whole.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(Object.keys(whole.json)).toEqual([
      'model',
      'created_at',
      'message',
      'done',
      'done_reason',
      'total_duration',
      'load_duration',
      'prompt_eval_count',
      'prompt_eval_duration',
      'eval_count',
      'eval_duration',
    ]);
    expect(whole.json).toMatchObject({
      model: 'qwen3:8b',
      message: { role: 'assistant', content: 'ok' },
      done: true,
      prompt_eval_count: promptTokensOf([TASK]),
    });
  });

  it('answers a tool call in each API as Ollama writes it', async () => {
    ollama = await startStandIn({
      provider: 'ollama',
      numCtx: 4096,
      reply: () => ({ call: { id: 'call_a1b2c3d4', name: 'read_file', args: { path: 'src/a.ts' } } }),
    });
    const tools = [
      { type: 'function', function: { name: 'read_file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
    ];
    const v1 = await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages: [TASK], tools });
    expect(v1.json.choices[0]).toEqual({
      index: 0,
      message: {
        role: 'assistant',
        content: '',
        tool_calls: [
          { id: 'call_a1b2c3d4', index: 0, type: 'function', function: { name: 'read_file', arguments: '{"path":"src/a.ts"}' } },
        ],
      },
      finish_reason: 'tool_calls',
    });
    expect(v1.json.usage.prompt_tokens).toBe(promptTokensOf([TASK], tools));
    const native = await call('POST', '/api/chat', { model: 'qwen3:8b', messages: [TASK], tools, stream: false });
    expect(native.json.message.tool_calls).toEqual([
      { id: 'call_a1b2c3d4', function: { index: 0, name: 'read_file', arguments: { path: 'src/a.ts' } } },
    ]);
  });

  it("refuses an unknown model with each API's 404", async () => {
    await start();
    const v1 = await call('POST', '/v1/chat/completions', { model: 'llama3', messages: [TASK] });
    expect([v1.status, v1.text]).toEqual([
      404,
      '{"error":{"message":"model \'llama3\' not found","type":"not_found_error","param":null,"code":null}}\n',
    ]);
    const native = await call('POST', '/api/chat', { model: 'llama3', messages: [TASK] });
    expect([native.status, native.json]).toEqual([404, { error: "model 'llama3' not found" }]);
    expect((await call('POST', '/v1/chat/completions', { model: 'qwen3:8b', messages: [] })).json.error.message).toBe(
      "[] is too short - 'messages'",
    );
    expect(ollama.chatCalls()).toEqual([]);
    expect((await call('GET', '/api/ps')).json.models).toEqual([]);
  });
});
