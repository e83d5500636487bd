import { afterEach, describe, expect, it } from 'vitest';
import { promptTokensOf, type LlamaCpp } from '../helpers/strict-llamacpp.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * The llama.cpp stand-in answers as llama-server does (tools/server/server-context.cpp,
 * server-common.cpp, server-task.cpp): /props and /v1/models state the slot's n_ctx, and a prompt of
 * n_ctx tokens or more is refused before decoding with the exceed_context_size_error 400, stream or
 * not. Expected bodies are written out here, apart from the stand-in's templates.
 */

let server: LlamaCpp;
afterEach(async () => server?.close());

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.origin}${path}`, {
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

const user = (bytes: number) => ({ role: 'user', content: 'q'.repeat(bytes) });

describe('discovery', () => {
  it('/props states n_ctx under default_generation_settings, with the other top-level fields', async () => {
    server = await startStandIn({ provider: 'llamacpp', nCtx: 8192 });
    const props = await call('GET', '/props');
    expect(props.status).toBe(200);
    expect(props.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(props.headers.get('server')).toBe('llama.cpp');
    expect(props.json.default_generation_settings.n_ctx).toBe(8192);
    expect(Object.keys(props.json.default_generation_settings)).toEqual(['params', 'n_ctx']);
    expect(Object.keys(props.json)).toEqual([
      'default_generation_settings',
      'total_slots',
      'model_alias',
      'model_ftype',
      'model_path',
      'modalities',
      'media_marker',
      'endpoint_slots',
      'endpoint_props',
      'endpoint_metrics',
      'ui',
      'ui_settings',
      'chat_template',
      'chat_template_caps',
      'bos_token',
      'eos_token',
      'build_info',
      'is_sleeping',
      'cors_proxy_enabled',
    ]);
    expect(props.json).toMatchObject({ total_slots: 4, model_alias: 'Qwen3-8B-Q4_K_M.gguf', model_path: '/models/Qwen3-8B-Q4_K_M.gguf' });
    expect((await call('GET', '/health')).text).toBe('{"status":"ok"}');
  });

  it('/v1/models: meta with n_ctx and n_ctx_train in current builds, n_ctx_train only in 2025 builds', async () => {
    server = await startStandIn({ provider: 'llamacpp', nCtx: 8192, model: 'qwen3-8b' });
    const models = (await call('GET', '/v1/models')).json;
    expect(models.object).toBe('list');
    expect(models.models[0]).toMatchObject({ name: 'qwen3-8b', model: 'qwen3-8b', capabilities: ['completion'] });
    expect(models.data[0]).toMatchObject({ id: 'qwen3-8b', object: 'model', owned_by: 'llamacpp' });
    expect(Object.keys(models.data[0].meta)).toEqual([
      'vocab_type',
      'n_vocab',
      'n_ctx',
      'n_ctx_train',
      'n_embd',
      'n_params',
      'size',
      'ftype',
    ]);
    expect(models.data[0].meta).toMatchObject({ n_ctx: 8192, n_ctx_train: 40960 });
    await server.close();
    server = await startStandIn({ provider: 'llamacpp', nCtx: 8192, era: '2025' });
    const old = (await call('GET', '/v1/models')).json;
    expect(Object.keys(old.data[0].meta)).toEqual(['vocab_type', 'n_vocab', 'n_ctx_train', 'n_embd', 'n_params', 'size']);
    expect((await call('GET', '/props')).json.default_generation_settings.n_ctx).toBe(8192);
  });

  it('an unknown route, or a wrong method, is the 404 File Not Found', async () => {
    server = await startStandIn({ provider: 'llamacpp', nCtx: 8192 });
    for (const [method, path] of [
      ['GET', '/api/tags'],
      ['POST', '/api/show'],
      ['GET', '/v1/chat/completions'],
    ]) {
      const res = await call(method, path);
      expect([res.status, res.text]).toEqual([404, '{"error":{"message":"File Not Found","type":"not_found_error","code":404}}']);
    }
  });
});

describe('the window', () => {
  it('refuses a prompt of n_ctx tokens or more with the exact exceed_context_size_error body', async () => {
    server = await startStandIn({ provider: 'llamacpp', nCtx: 1000 });
    const messages = [user(8000)];
    expect(promptTokensOf(messages)).toBe(2004);
    const res = await call('POST', '/v1/chat/completions', { model: 'x', messages });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.text).toBe(
      '{"error":{"code":400,"message":"request (2004 tokens) exceeds the available context size (1000 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":2004,"n_ctx":1000}}',
    );
    // Exactly n_ctx is refused too (n_tokens >= n_ctx), one token less is answered.
    const exact = await call('POST', '/v1/chat/completions', { model: 'x', messages: [user(3984)] });
    expect([exact.status, exact.json.error.n_prompt_tokens]).toEqual([400, 1000]);
    const under = await call('POST', '/v1/chat/completions', { model: 'x', messages: [user(3980)] });
    expect([under.status, under.json.usage.prompt_tokens]).toEqual([200, 999]);
    // A stream's first error is answered as a plain 400, not in the stream.
    const stream = await call('POST', '/v1/chat/completions', { model: 'x', messages, stream: true });
    expect([stream.status, stream.json.error.type]).toEqual([400, 'exceed_context_size_error']);
    expect(server.refusals().map((c) => c.promptTokens)).toEqual([2004, 1000, 2004]);
  });

  it('answers with usage, timings and the prompt cache as llama-server writes them', async () => {
    server = await startStandIn({ provider: 'llamacpp', nCtx: 8192, buildInfo: 'b7000-abcdef12' });
    const first = [{ role: 'system', content: 'You review code.' }, user(400)];
    const one = await call('POST', '/v1/chat/completions', { model: 'x', messages: first });
    expect(Object.keys(one.json)).toEqual(['choices', 'created', 'model', 'system_fingerprint', 'object', 'usage', 'id', 'timings']);
    expect(one.json.choices).toEqual([{ finish_reason: 'stop', index: 0, message: { role: 'assistant', content: 'ok' } }]);
    expect(one.json).toMatchObject({ model: 'Qwen3-8B-Q4_K_M.gguf', system_fingerprint: 'b7000-abcdef12', object: 'chat.completion' });
    expect(one.json.id).toMatch(/^chatcmpl-[0-9A-Za-z]{32}$/);
    expect(one.json.usage).toEqual({
      completion_tokens: 1,
      prompt_tokens: promptTokensOf(first),
      total_tokens: promptTokensOf(first) + 1,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    const second = [...first, { role: 'assistant', content: 'ok' }, user(40)];
    const two = await call('POST', '/v1/chat/completions', { model: 'x', messages: second });
    expect(two.json.usage.prompt_tokens_details.cached_tokens).toBe(promptTokensOf(first));
    expect(two.json.timings).toMatchObject({ cache_n: promptTokensOf(first), prompt_n: promptTokensOf(second) - promptTokensOf(first) });
  });

  it('streams the role delta first, the usage chunk only with include_usage, timings on the last chunk', async () => {
    server = await startStandIn({
      provider: 'llamacpp',
      nCtx: 8192,
      reply: () => ({ text: 'reading', call: { id: 'abc', name: 'read_file', args: { path: 'a.ts' } } }),
    });
    const body = { model: 'x', messages: [user(40)], stream: true };
    const chunks = (text: string) =>
      text
        .split('\n\n')
        .filter(Boolean)
        .map((e) => e.replace(/^data: /, ''));
    const plain = chunks((await call('POST', '/v1/chat/completions', body)).text);
    expect(plain.at(-1)).toBe('[DONE]');
    const parsed = plain.slice(0, -1).map((c) => JSON.parse(c));
    expect(parsed.map((c) => c.choices[0].delta)).toEqual([
      { role: 'assistant', content: null },
      { content: 'reading' },
      { tool_calls: [{ index: 0, id: 'abc', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.ts"}' } }] },
      {},
    ]);
    expect(parsed.at(-1).choices[0].finish_reason).toBe('tool_calls');
    expect(parsed.some((c) => 'usage' in c)).toBe(false);
    expect(parsed.at(-1).timings).toBeDefined();
    const withUsage = chunks((await call('POST', '/v1/chat/completions', { ...body, stream_options: { include_usage: true } })).text)
      .slice(0, -1)
      .map((c) => JSON.parse(c));
    expect(withUsage.at(-1)).toMatchObject({
      choices: [],
      object: 'chat.completion.chunk',
      usage: { prompt_tokens: promptTokensOf(body.messages) },
    });
    const whole = await call('POST', '/v1/chat/completions', { ...body, stream: false });
    expect(whole.json.choices[0].message).toEqual({
      role: 'assistant',
      content: 'reading',
      tool_calls: [{ type: 'function', function: { name: 'read_file', arguments: '{"path":"a.ts"}' }, id: 'abc' }],
    });
  });
});
