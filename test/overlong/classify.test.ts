import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent, isBindingRefusal, type StatedLimits, type Verdict } from '../../src/overlong/classify.js';
import { loadFixtures } from '../../scripts/lofo.js';
import { fixtures, type ErrorFixture as Fixture } from '../helpers/fixtures.js';

const byId = new Map(fixtures.map((f) => [f.id, f]));

function classifyFixture(f: Fixture): Verdict {
  return f.in_stream ? classifyStreamEvent(f.body) : classifyResponse({ status: f.status, contentType: f.content_type, body: f.body });
}

function fixture(id: string): Fixture {
  const f = byId.get(id);
  if (f === undefined) throw new Error(`no fixture ${id}`);
  return f;
}

describe('every fixture gets its label', () => {
  it('has unique ids and the fields the README promises', () => {
    expect(byId.size).toBe(fixtures.length);
    for (const f of fixtures) {
      expect(typeof f.body).toBe('string');
      expect(typeof f.overlong).toBe('boolean');
      expect(f.source.length).toBeGreaterThan(0);
    }
  });

  it.each(fixtures.map((f) => [f.id, f] as const))('%s', (_id, f) => {
    const verdict = classifyFixture(f);
    expect(verdict.overlong, `rule ${verdict.rule}`).toBe(f.overlong);
    if (verdict.overlong) {
      expect(verdict.reason).toBe(f.status === 413 ? 'body_too_large' : 'context_length');
    }
  });
});

describe('every fixture of the small-window file gets its label', () => {
  const extra = loadFixtures().filter((f) => !byId.has(f.id));

  it('holds the overflows whose stated window is too small for the e2e request', () => {
    expect(extra.map((f) => f.id).sort()).toEqual([
      'llama-cpp-python-requested-tokens-exceed-context-window',
      'lmstudio-input-length-exceeds-context-length',
      'tgi-inputs-must-have-less-than',
    ]);
  });

  it.each(extra.map((f) => [f.id, f] as const))('%s', (_id, f) => {
    const verdict = classifyFixture({ ...f, provider: '', source: '', notes: '' });
    expect(verdict.overlong, `rule ${verdict.rule}`).toBe(f.overlong);
  });
});

describe('stated numbers are extracted', () => {
  const cases: [string, StatedLimits][] = [
    ['openai-ctx-messages-compact', { limitTokens: 4097, promptTokens: 4294 }],
    [
      'openai-ctx-messages-plus-completion-pretty',
      { limitTokens: 4097, promptTokens: 3120, completionTokens: 1000, completionCounted: true },
    ],
    ['openai-legacy-completions-wording', { limitTokens: 8192, promptTokens: 8977, completionTokens: 0, completionCounted: true }],
    ['openai-embeddings-max-tokens-per-request', { limitTokens: 300000, promptTokens: 319487 }],
    ['anthropic-prompt-too-long', { limitTokens: 200000, promptTokens: 200251 }],
    ['anthropic-input-plus-max-tokens', { limitTokens: 200000, promptTokens: 143653, completionTokens: 64000, completionCounted: true }],
    ['gemini-native-input-token-count', { limitTokens: 1048576, promptTokens: 3475108 }],
    ['gemini-code-assist-array-body', { limitTokens: 1048576, promptTokens: 1200293 }],
    ['gemini-413-max-request-body-size', { limitBytes: 1048576, bodyBytes: 1056562 }],
    ['aws-apigateway-413-content-length-exceeded', { limitBytes: 10485760 }],
    ['mistral-ctx', { limitTokens: 131072, promptTokens: 159202 }],
    ['openrouter-endpoint-ctx-input', { limitTokens: 32768, promptTokens: 42832 }],
    ['openrouter-200-upstream-ctx-as-502', { limitTokens: 16000, promptTokens: 13069, completionTokens: 4096, completionCounted: true }],
    [
      'openrouter-raw-bedrock-input-plus-max-tokens',
      { limitTokens: 204658, promptTokens: 149674, completionTokens: 64000, completionCounted: true },
    ],
    ['tgi-total-tokens-422', { limitTokens: 65537, promptTokens: 79993, completionTokens: 1024, completionCounted: true }],
    ['together-tgi-validation', { limitTokens: 2048, promptTokens: 2019, completionTokens: 30, completionCounted: true }],
    ['vllm-ctx-new-format', { limitTokens: 4096, promptTokens: 4096, completionTokens: 1, completionCounted: true }],
    ['llamacpp-exceed-context-size-v1', { limitTokens: 8192, promptTokens: 14429 }],
    ['llamacpp-exceed-context-size-v2', { limitTokens: 25088, promptTokens: 25837 }],
    ['llamacpp-500-exceed-context-size', { limitTokens: 256, promptTokens: 1407 }],
    ['lmstudio-n-keep-gt-n-ctx', { limitTokens: 4096, promptTokens: 13055 }],
    ['lmstudio-trying-to-keep-in-stream', { limitTokens: 2048, promptTokens: 14538 }],
    ['dashscope-range-of-input-length', { limitTokens: 204800 }],
    ['cohere-too-many-tokens', { limitTokens: 2048, completionCounted: true }],
    ['xai-maximum-prompt-length', { limitTokens: 131072, promptTokens: 136973 }],
    ['xai-input-too-large-budget', { limitTokens: 975424, promptTokens: 1149677 }],
    ['sglang-input-longer-than-context', { limitTokens: 40960, promptTokens: 61709 }],
    ['vertex-unable-to-submit-input-token-count', { limitTokens: 1048576, promptTokens: 1251952 }],
    ['vertex-input-token-count-without-count', { limitTokens: 1048576 }],
    ['fireworks-prompt-too-long', { limitTokens: 262143, promptTokens: 262377 }],
    ['openai-gpt5-input-tokens-configured-limit', { limitTokens: 272000, promptTokens: 289650 }],
    ['moonshot-exceeded-model-token-limit', { limitTokens: 262144 }],
    ['minimax-context-window-exceeds-limit', {}],
    ['envoy-413-payload-too-large', {}],
  ];

  it.each(cases)('%s', (id, expected) => {
    const verdict = classifyFixture(fixture(id));
    expect(verdict.overlong).toBe(true);
    if (verdict.overlong) expect(verdict.limits).toEqual(expected);
  });
});

describe('max_tokens that leaves no room for a prompt is not overlong', () => {
  it.each([
    ['vllm-max-tokens-equals-window-input-text'],
    ['vllm-max-tokens-too-large-mentions-context-length'],
    ['openrouter-output-reservation-equals-window'],
    ['azure-completion-alone-exceeds-window'],
    ['sglang-requested-token-count-completion-fills-window'],
    ['together-inputs-plus-max-new-tokens-no-room'],
  ])('%s', (id) => {
    expect(classifyFixture(fixture(id))).toEqual({ overlong: false, rule: 'completion_fills_window' });
  });

  it('keeps input + max_tokens overflows with real room for the prompt overlong', () => {
    const body = JSON.stringify({
      error: {
        message:
          "'max_tokens' or 'max_completion_tokens' is too large: 2000. This model's maximum context length is 4096 tokens and your request has 3000 input tokens (2000 > 4096 - 3000). None",
        type: 'BadRequestError',
        param: null,
        code: 400,
      },
    });
    const verdict = classifyResponse({ status: 400, body });
    expect(verdict).toMatchObject({
      overlong: true,
      reason: 'context_length',
      limits: { limitTokens: 4096, promptTokens: 3000, completionTokens: 2000, completionCounted: true },
    });
  });
});

describe('rule names are stable', () => {
  it.each([
    ['openai-ctx-messages-compact', 'context_length_exceeded'],
    ['deepseek-ctx', 'maximum_context_length'],
    ['anthropic-prompt-too-long', 'prompt_too_long'],
    ['openai-string-above-max-length-content', 'string_above_max_length'],
    ['tool-name-string-above-max-length', 'schema_string_too_long'],
    ['litellm-context-window-class-wrapping-tool-description', 'schema_string_too_long'],
    ['groq-413-tpm-request-too-large', 'rate_limit'],
    ['openai-429-request-too-large-tpm', 'status_429'],
    ['azure-content-filter-prompt', 'content_filter'],
    ['anthropic-max-tokens-over-model-cap', 'output_token_cap'],
    ['anthropic-image-exceeds-5mb', 'attachment_limit'],
    ['nginx-413-with-version-and-padding', 'request_entity_too_large'],
    ['fastify-413-body-too-large', 'fst_err_ctp_body_too_large'],
    ['openai-200-finish-reason-length', 'no_error_object'],
    ['openai-500-server-error', 'no_signal'],
  ])('%s -> %s', (id, rule) => {
    expect(classifyFixture(fixture(id)).rule).toBe(rule);
  });
});

describe('negatives', () => {
  const chunk = '{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}';

  it('passes a normal completion chunk, with or without SSE framing', () => {
    expect(classifyStreamEvent(chunk)).toEqual({ overlong: false, rule: 'no_error_marker' });
    expect(classifyStreamEvent(`data: ${chunk}\n\n`).overlong).toBe(false);
    expect(classifyStreamEvent('data: [DONE]\n\n').overlong).toBe(false);
  });

  it('passes a chunk whose generated text talks about overflows', () => {
    const delta = JSON.stringify({
      id: 'chatcmpl-2',
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta: { content: "Error: prompt is too long. This model's maximum context length is 8 tokens." } }],
    });
    expect(classifyStreamEvent(delta)).toEqual({ overlong: false, rule: 'no_error_object' });
  });

  it('passes a final chunk with finish_reason length', () => {
    const last = JSON.stringify({
      id: 'chatcmpl-3',
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta: {}, finish_reason: 'length' }],
    });
    expect(classifyStreamEvent(last).overlong).toBe(false);
  });

  it('passes a 200 completion whose answer quotes an overflow message', () => {
    const body = JSON.stringify({
      id: 'chatcmpl-4',
      object: 'chat.completion',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: 'You hit "prompt is too long: 250000 tokens > 200000 maximum".' },
          finish_reason: 'stop',
        },
      ],
    });
    expect(classifyResponse({ status: 200, contentType: 'application/json', body }).overlong).toBe(false);
  });

  it('passes a 200 answer whose tool input happens to look like an error', () => {
    const body = JSON.stringify({
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      content: [{ type: 'tool_use', id: 't1', name: 'notify', input: { message: 'prompt is too long: 9 tokens > 8 maximum' } }],
      stop_reason: 'tool_use',
    });
    expect(classifyResponse({ status: 200, body })).toEqual({ overlong: false, rule: 'no_error_object' });
  });

  it('does not read "context" in a documentation URL as an overflow', () => {
    const body = JSON.stringify({
      error: {
        message:
          'The model `gpt-4o-mini-128k` does not exist or you do not have access to it. See https://platform.openai.com/docs/guides/context-window and https://platform.openai.com/docs/models',
        type: 'invalid_request_error',
        param: null,
        code: 'model_not_found',
      },
    });
    expect(classifyResponse({ status: 404, body })).toEqual({ overlong: false, rule: 'model_not_found' });
    expect(classifyResponse({ status: 400, body }).overlong).toBe(false);
  });

  it('does not treat a too-long tool name or description as overlong', () => {
    const body = JSON.stringify({
      error: {
        message:
          "Invalid 'tools[3].function.description': string too long. Expected a string with maximum length 1024, but got a string with length 4000 instead.",
        type: 'invalid_request_error',
        param: 'tools[3].function.description',
        code: 'string_above_max_length',
      },
    });
    expect(classifyResponse({ status: 400, body })).toEqual({ overlong: false, rule: 'schema_string_too_long' });
  });

  it('treats string_above_max_length on a chat message as overlong', () => {
    const body = JSON.stringify({
      error: {
        message:
          "Invalid 'messages[12].content': string too long. Expected a string with maximum length 10485760, but got a string with length 11000000 instead.",
        type: 'invalid_request_error',
        param: 'messages[12].content',
        code: 'string_above_max_length',
      },
    });
    expect(classifyResponse({ status: 400, body })).toMatchObject({ overlong: true, reason: 'context_length' });
  });

  it('treats string_above_max_length on a message content named only in the text (an empty param) as overlong', () => {
    const body = JSON.stringify({
      error: { message: "Invalid 'messages[3].content': string too long.", param: '', code: 'string_above_max_length' },
    });
    expect(classifyResponse({ status: 400, body })).toMatchObject({
      overlong: true,
      reason: 'context_length',
      rule: 'string_above_max_length',
    });
  });

  it('never calls a 429 overlong, even when it asks to shorten the prompt', () => {
    const body = JSON.stringify({
      error: { message: 'prompt is too long for your tier; please reduce the prompt length', code: 'context_length_exceeded' },
    });
    expect(classifyResponse({ status: 429, body })).toEqual({ overlong: false, rule: 'status_429' });
  });

  it('does not match bare words', () => {
    for (const message of ['context', 'too long', 'Request too long ago', 'token limit', 'The context is invalid']) {
      const body = JSON.stringify({ error: { message, type: 'invalid_request_error' } });
      expect(classifyResponse({ status: 400, body }).overlong, message).toBe(false);
    }
  });

  it('passes auth, overload and server errors that mention context', () => {
    const auth = JSON.stringify({ error: { message: 'Invalid API key in this context.', code: 'invalid_api_key' } });
    expect(classifyResponse({ status: 401, body: auth }).overlong).toBe(false);
    expect(classifyResponse({ status: 503, body: 'upstream connect error or disconnect/reset before headers' }).overlong).toBe(false);
    expect(
      classifyStreamEvent('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'),
    ).toEqual({ overlong: false, rule: 'overloaded' });
  });
});

describe('body-size rejections', () => {
  it.each([
    ['empty', ''],
    ['whitespace', '\r\n'],
    ['html', '<html><body><h1>413 Request Entity Too Large</h1></body></html>'],
    ['unrelated json', '{"detail":"Not allowed"}'],
    ['binary-looking', '\u0000\u0001\uFFFD\uD800'],
  ])('any 413 (%s) is body_too_large', (_name, body) => {
    expect(classifyResponse({ status: 413, body })).toMatchObject({ overlong: true, reason: 'body_too_large' });
  });

  it('a 413 that is really a per-minute quota is not', () => {
    const body = '{"error":{"message":"Request too large for model `x` on tokens per minute (TPM): Limit 6000, Requested 9000"}}';
    expect(classifyResponse({ status: 413, body })).toEqual({ overlong: false, rule: 'rate_limit' });
  });

  describe('the error codes of a body of many errors', () => {
    const codes = (n: number, last: string) =>
      JSON.stringify(Array.from({ length: n + 1 }, (_, i) => ({ error: { code: i === n ? last : `code_${i}` } })));

    it.each([
      ['rate_limit_exceeded', 'rate_limit'],
      ['insufficient_quota', 'quota'],
    ])('%s, after 31 other codes, turns a 413 into %s', (code, rule) => {
      expect(classifyResponse({ status: 413, body: codes(31, code) })).toEqual({ overlong: false, rule });
    });

    it('another code (a content filter) does not turn a 413 around', () => {
      expect(classifyResponse({ status: 413, body: codes(1, 'content_filter') })).toEqual({
        overlong: true,
        reason: 'body_too_large',
        limits: {},
        rule: 'status_413',
      });
    });
  });

  it('recognises body-size text under other statuses', () => {
    expect(
      classifyResponse({ status: 400, body: '{"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}' }),
    ).toMatchObject({ overlong: true, reason: 'body_too_large', rule: 'request_too_large' });
  });
});

describe('stream events', () => {
  const overflow =
    '{"type":"error","sequence_number":2,"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again.","param":"input"}}';

  it('reads a bare data payload, a framed event and CRLF framing alike', () => {
    expect(classifyStreamEvent(overflow)).toMatchObject({ overlong: true, reason: 'context_length' });
    expect(classifyStreamEvent(`event: error\ndata: ${overflow}\n\n`)).toMatchObject({ overlong: true });
    expect(classifyStreamEvent(`event: error\r\ndata: ${overflow}\r\n\r\n`)).toMatchObject({ overlong: true });
  });

  it('reads a plain-text payload of an `event: error`, and only of that event', () => {
    const text = 'prompt is too long: 300000 tokens > 200000 maximum';
    expect(classifyStreamEvent(`event: error\ndata: ${text}\n\n`)).toMatchObject({
      overlong: true,
      limits: { promptTokens: 300000, limitTokens: 200000 },
    });
    expect(classifyStreamEvent(`event: message\ndata: ${text}\n\n`).overlong).toBe(false);
  });

  it('reads the error when a normal event came first in the same chunk', () => {
    const text = `data: {"id":"c","object":"chat.completion.chunk","choices":[]}\n\ndata: ${overflow}\n\n`;
    expect(classifyStreamEvent(text)).toMatchObject({ overlong: true });
  });

  it('reads an NDJSON error line (Ollama native streams)', () => {
    const text = '{"error":"the prompt is longer than the context length currently available to the model"}\n';
    expect(classifyStreamEvent(text)).toMatchObject({ overlong: true, rule: 'prompt_longer_than_context' });
  });

  it('reads a truncated error chunk', () => {
    const text =
      'data: {"error":{"message":"This model\'s maximum context length is 8192 tokens. However, your messages resulted in 9000 tok';
    expect(classifyStreamEvent(text)).toMatchObject({ overlong: true, limits: { limitTokens: 8192 } });
  });
});

describe('bodies in odd shapes', () => {
  it('reads a Python repr pasted into a message', () => {
    const body = JSON.stringify({
      error: {
        message:
          "OpenAIException - Error code: 400 - {'error': {'message': 'Please reduce the length of the messages or completion.', 'type': 'invalid_request_error', 'param': 'messages', 'code': 'context_length_exceeded'}}",
      },
    });
    expect(classifyResponse({ status: 400, body })).toMatchObject({ overlong: true });
  });

  it('reads a body cut off at the size limit', () => {
    const body = `{"error":{"message":"prompt is too long: 250000 tokens > 200000 maximum","padding":"${'x'.repeat(100)}`;
    expect(classifyResponse({ status: 400, body })).toMatchObject({
      overlong: true,
      limits: { promptTokens: 250000, limitTokens: 200000 },
    });
  });

  it('recognises the LiteLLM class name on an unfamiliar provider text', () => {
    const body = JSON.stringify({
      error: { message: 'litellm.ContextWindowExceededError: SomeProviderException - input rejected', code: '400' },
    });
    expect(classifyResponse({ status: 400, body })).toMatchObject({ overlong: true, rule: 'litellm_context_window_exceeded' });
  });

  it('reads a 200 error object from an aggregator', () => {
    const body = JSON.stringify({ error: { message: 'prompt is too long: 210000 tokens > 200000 maximum', code: 502 } });
    expect(classifyResponse({ status: 200, body })).toMatchObject({ overlong: true, reason: 'context_length' });
  });
});

describe('refusals of bound thinking are not overflows, and are told apart for the rescue', () => {
  const binding = fixtures.filter((f) => /thinking|block-binding/.test(f.id) && !f.overlong);

  it.each(binding.map((f) => [f.id, f] as const))('%s: a binding refusal', (_id, f) => {
    const verdict = classifyFixture(f);
    expect(verdict.overlong).toBe(false);
    expect(isBindingRefusal(verdict), `rule ${verdict.rule}`).toBe(true);
  });

  it('no other fixture is one', () => {
    expect(binding.length).toBeGreaterThanOrEqual(6);
    const others = fixtures.filter((f) => !binding.includes(f)).filter((f) => isBindingRefusal(classifyFixture(f)));
    expect(others.map((f) => f.id)).toEqual([]);
  });

  it('an overflow that mentions thinking stays an overflow', () => {
    const body = JSON.stringify({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum (thinking blocks included)' },
    });
    const verdict = classifyResponse({ status: 400, contentType: 'application/json', body });
    expect([verdict.overlong, isBindingRefusal(verdict)]).toEqual([true, false]);
  });
});
