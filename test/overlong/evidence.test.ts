import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent, createClassifier } from '../../src/overlong/classify.js';
import { gatherEvidence, MAX_SCAN_CHARS } from '../../src/overlong/evidence.js';
import { fixtures } from '../helpers/fixtures.js';

// What counts as an error object in a 200 body or a stream event, and what the evidence keeps:
// a false alarm on a successful answer would compact a conversation that was fine.
const overflow = 'prompt is too long: 300000 tokens > 200000 maximum';

describe('what carries an error', () => {
  it.each([
    ['an error object', { error: { message: overflow } }, true],
    ['an error string', { error: overflow }, true],
    ['type error', { type: 'error', detail: overflow }, true],
    ['object error', { object: 'error', message: overflow }, true],
    ['a bare message', { message: overflow }, true],
    ['an error one level down', { data: { error: { message: overflow } } }, true],
    ['an error two levels down', { data: { item: { error: { message: overflow } } } }, false],
    ['a null error', { error: null, detail: overflow }, false],
    ['a false error', { error: false, detail: overflow }, false],
    ['an empty error', { error: '', detail: overflow }, false],
    ['a message beside choices', { message: overflow, choices: [] }, false],
    ['a message beside a delta', { message: overflow, delta: {} }, false],
    ['a message that is not a string', { message: { text: overflow } }, false],
  ])('%s: %s', (_name, value, carries) => {
    expect(gatherEvidence(JSON.stringify(value), false).carriesError).toBe(carries);
    expect(classifyResponse({ status: 200, body: JSON.stringify(value) }).overlong).toBe(carries);
  });

  it('an error inside JSON embedded in a successful answer does not count', () => {
    const body = JSON.stringify({ choices: [], message: `tool said ${JSON.stringify({ error: { message: overflow } })}` });
    expect(gatherEvidence(body, false).carriesError).toBe(false);
  });

  it('a truncated chunk counts when it shows an error key', () => {
    expect(gatherEvidence('{"error": {"message": "prompt is too lo', false).carriesError).toBe(true);
    expect(gatherEvidence(`{'exception': 'prompt is too lo`, false).carriesError).toBe(true);
    expect(gatherEvidence('{"type": "error", "x": "prompt is too lo', false).carriesError).toBe(true);
    expect(gatherEvidence('{"content": "prompt is too lo', false).carriesError).toBe(false);
  });
});

describe('what the evidence keeps', () => {
  it("the paths an error blames: param, quoted param, Invalid 'x'", () => {
    const e = gatherEvidence(
      JSON.stringify({
        error: { message: "Invalid 'messages[2].content': string too long. {'param': 'input[0]'}", param: 'messages[2].content' },
      }),
      true,
    );
    expect(e.paths).toEqual(['input[0]', 'messages[2].content', 'messages[2].content']);
  });

  it('string_above_max_length on a message name is a schema error; on content, an overflow', () => {
    const on = (param: string) =>
      JSON.stringify({ error: { message: `Invalid '${param}': string too long.`, code: 'string_above_max_length', param } });
    expect(classifyResponse({ status: 400, body: on('messages[3].name') })).toEqual({ overlong: false, rule: 'schema_string_too_long' });
    expect(classifyResponse({ status: 400, body: on('messages[3].content') })).toMatchObject({
      overlong: true,
      rule: 'string_above_max_length',
    });
    expect(classifyResponse({ status: 400, body: on('temperature_notes') })).toEqual({ overlong: false, rule: 'schema_string_too_long' });
    const fromMessage = JSON.stringify({
      error: { message: "Invalid 'input[0].content': string too long.", code: 'string_above_max_length' },
    });
    expect(classifyResponse({ status: 400, body: fromMessage })).toMatchObject({ overlong: true });
  });

  it('numeric fields: the first non-negative integer of each', () => {
    const e = gatherEvidence(
      JSON.stringify([
        { error: { n_ctx: -1, n_prompt_tokens: 1.5 } },
        { error: { n_ctx: 4096, n_prompt_tokens: 5000 } },
        { error: { n_ctx: 1 } },
      ]),
      true,
    );
    expect(e.fields).toEqual({ limitTokens: 4096, promptTokens: 5000 });
  });

  it('numeric codes and code-like keys', () => {
    const e = gatherEvidence(
      JSON.stringify({
        error: {
          code: 400,
          type: 'Invalid_Request',
          status: 'FAILED',
          __type: 'ValidationException',
          reason: 'badRequest',
          error_code: 'E1',
        },
      }),
      true,
    );
    expect(e.codes).toEqual(['400', 'invalid_request', 'failed', 'validationexception', 'badrequest', 'e1']);
  });

  it('text from message-like keys only, and arrays of them', () => {
    const e = gatherEvidence(JSON.stringify({ error: { message: 'a', detail: ['b', { msg: 'c' }], hint: 'not text', title: 'd' } }), true);
    expect(e.text).toBe('a\nb\nc\nd');
  });
});

describe('streams', () => {
  it('reads a last event without its closing blank line', () => {
    expect(classifyStreamEvent(`event: error\ndata: ${JSON.stringify({ error: { message: overflow } })}`)).toMatchObject({
      overlong: true,
    });
  });

  it('skips [DONE] and empty data', () => {
    expect(gatherEvidence('data: [DONE]\n\ndata: \n\n', false)).toMatchObject({ codes: [], text: '', carriesError: false });
  });

  it('an event named error marks the chunk an error even with non-JSON data', () => {
    expect(gatherEvidence('event: ERROR\ndata: upstream failed\n\n', false)).toMatchObject({ carriesError: true, text: 'upstream failed' });
    expect(gatherEvidence('event: message\ndata: upstream failed\n\n', false)).toMatchObject({ carriesError: false, text: '' });
  });

  it('a truncated JSON payload in a data line is read as text', () => {
    expect(gatherEvidence('data: {"error":{"message":"prompt is too lo', false)).toMatchObject({
      carriesError: true,
      text: '{"error":{"message":"prompt is too lo',
    });
  });
});

describe('which keys, codes, numbers and embedded JSON are read, per provider shape', () => {
  /** The general layer alone: a classifier with no specific rule. */
  const generalOnly = createClassifier([]);

  // What the evidence holds where a change would change a verdict, a rule name or the numbers
  // the gateway reads. The bounds on a hostile body are pinned at their values in limits.test.ts.
  const body = (id: string): string => {
    const f = fixtures.find((x) => x.id === id);
    if (f === undefined) throw new Error(`no fixture ${id}`);
    return f.body;
  };
  const anthropicOverflow = 'prompt is too long: 300000 tokens > 200000 maximum';

  describe('every message-like key is read as the error text', () => {
    it.each(['message', 'error', 'detail', 'details', 'msg', 'error_message', 'errorMessage', 'description', 'raw', 'title'])(
      '%s',
      (key) => {
        const v = classifyResponse({ status: 400, body: JSON.stringify({ error: { [key]: anthropicOverflow } }) });
        expect(v).toEqual({
          overlong: true,
          reason: 'context_length',
          limits: { promptTokens: 300000, limitTokens: 200000 },
          rule: 'prompt_too_long',
        });
      },
    );

    it('a key that is not message-like is not', () => {
      const v = classifyResponse({ status: 400, body: JSON.stringify({ error: { hint: anthropicOverflow } }) });
      expect(v).toEqual({ overlong: false, rule: 'no_signal' });
    });
  });

  describe('every code-like key is read as a code', () => {
    // AWS JSON services answer a throttled call with `{"__type":"ThrottlingException","message":"Rate exceeded"}`:
    // the words "Rate exceeded" alone are no veto, the code is.
    it.each(['code', 'type', 'error_type', 'errorType', 'error_code', 'errorCode', 'status', '__type', 'reason'])('%s', (key) => {
      const b = JSON.stringify({ [key]: 'ThrottlingException', message: 'Rate exceeded' });
      expect(classifyResponse({ status: 400, body: b })).toEqual({ overlong: false, rule: 'rate_limit' });
      expect(gatherEvidence(b, true).codes).toEqual(['throttlingexception']);
    });

    it('Rate exceeded without a code is no signal either way', () => {
      expect(classifyResponse({ status: 400, body: JSON.stringify({ message: 'Rate exceeded' }) })).toEqual({
        overlong: false,
        rule: 'no_signal',
      });
    });

    it('TGI error_type and a numeric code', () => {
      expect(gatherEvidence(body('tgi-total-tokens-422'), true).codes).toEqual(['validation']);
      expect(gatherEvidence(body('gemini-native-input-token-count'), true).codes).toEqual(['400', 'invalid_argument']);
    });
  });

  describe('llama.cpp numeric fields', () => {
    it('n_ctx and n_prompt_tokens give the numbers when the message states none', () => {
      expect(generalOnly.classifyResponse({ status: 400, body: body('llamacpp-exceed-context-size-v1') })).toMatchObject({
        overlong: true,
        limits: { promptTokens: 14429, limitTokens: 8192 },
      });
    });

    it('a field of 0 is read (and the first value of each wins)', () => {
      const e = gatherEvidence(JSON.stringify([{ error: { n_ctx: 0 } }, { error: { n_ctx: 4096, n_prompt_tokens: 0 } }]), true);
      expect(e.fields).toEqual({ limitTokens: 0, promptTokens: 0 });
    });

    it('an unsafe integer is not', () => {
      const e = gatherEvidence(JSON.stringify({ error: { n_ctx: 2 ** 53, n_prompt_tokens: 5000 } }), true);
      expect(e.fields).toEqual({ promptTokens: 5000 });
    });
  });

  describe('JSON inside a message', () => {
    const llama = body('llamacpp-exceed-context-size-v1');

    it('a body re-wrapped by a proxy after a prefix gives its fields', () => {
      const wrapped = JSON.stringify({ error: { message: `ConnectionError: ${llama}`, code: 502 } });
      expect(generalOnly.classifyResponse({ status: 200, body: wrapped })).toMatchObject({
        overlong: true,
        limits: { promptTokens: 14429, limitTokens: 8192 },
      });
    });

    it('a body that is the whole message, or the whole (double-encoded) response', () => {
      const whole = JSON.stringify({ error: { message: llama } });
      expect(gatherEvidence(whole, true).fields).toEqual({ promptTokens: 14429, limitTokens: 8192 });
      const doubled = JSON.stringify(llama);
      expect(gatherEvidence(doubled, true)).toMatchObject({
        codes: ['exceed_context_size_error', '400', 'exceed_context_size_error'],
        fields: { promptTokens: 14429, limitTokens: 8192 },
      });
    });

    it('an array body re-wrapped as a string is parsed from its first bracket', () => {
      const gemini = body('gemini-code-assist-array-body');
      expect(gatherEvidence(JSON.stringify(gemini), true).codes).toEqual(['400', 'badrequest', 'invalid_argument']);
      expect(gatherEvidence(JSON.stringify({ error: { message: `VertexAIException - ${gemini}` } }), true).codes).toEqual([
        '400',
        'badrequest',
        'invalid_argument',
      ]);
    });

    it('an object holding an array is parsed from its first brace', () => {
      const gemini = body('gemini-code-assist-array-body');
      const inner = JSON.stringify(JSON.parse(gemini)[0]);
      expect(gatherEvidence(JSON.stringify({ error: { message: `VertexAIException - ${inner}` } }), true).codes).toEqual([
        '400',
        'badrequest',
        'invalid_argument',
      ]);
    });
  });

  describe('Python reprs and truncated bodies', () => {
    it('reads quoted codes with or without spaces around the colon, long ones too, and an unterminated one', () => {
      const repr = (code: string) =>
        JSON.stringify({ error: { message: `OpenAIException - {'error': {'type': 'invalid_request_error', 'code': '${code}'}}` } });
      expect(gatherEvidence(repr('context_length_exceeded'), true).codes).toEqual(['invalid_request_error', 'context_length_exceeded']);
      expect(gatherEvidence(repr('c'.repeat(64)), true).codes).toEqual(['invalid_request_error', 'c'.repeat(64)]);
      const compact = JSON.stringify({ error: { message: `upstream: {"code":"context_length_exceeded"` } });
      expect(gatherEvidence(compact, true).codes).toEqual(['context_length_exceeded']);
    });

    it('reads quoted params and Invalid paths, long ones too', () => {
      const param = (p: string) => JSON.stringify({ error: { message: `{'param': '${p}'}` } });
      expect(gatherEvidence(param('messages'), true).paths).toEqual(['messages']);
      expect(gatherEvidence(param('p'.repeat(200)), true).paths).toEqual(['p'.repeat(200)]);
      const invalid = (p: string) => JSON.stringify({ error: { message: `Invalid '${p}': string too long.` } });
      expect(gatherEvidence(invalid('p'.repeat(200)), true).paths).toEqual(['p'.repeat(200)]);
    });

    it('finds the error key of a truncated body behind a long content', () => {
      const cut = (pad: number) => `{"content": "${'x'.repeat(pad)}", "error": {"message": "prompt is too lo`;
      expect(gatherEvidence(cut(MAX_SCAN_CHARS - 100), false).carriesError).toBe(true);
    });

    it('a plain-text chunk counts as an error when it says "error", however far in the scanned text', () => {
      const text = (pad: number) => `${'x'.repeat(pad)} error: the prompt is too long`;
      expect(gatherEvidence(text(MAX_SCAN_CHARS - 100), false).carriesError).toBe(true);
    });
  });

  describe('message text', () => {
    it('an empty message adds nothing, not even a line break', () => {
      expect(gatherEvidence(JSON.stringify({ error: { message: '', detail: 'second' } }), true).text).toBe('second');
    });
  });

  describe('stream payloads', () => {
    it('an error event whose data is empty adds no text', () => {
      expect(gatherEvidence('event: error\ndata: \n\n', false)).toMatchObject({ carriesError: true, text: '' });
    });

    it('a data payload is trimmed before it is read as JSON', () => {
      const e = gatherEvidence(`event: message\ndata:   ${JSON.stringify({ error: { message: anthropicOverflow } })}  \n\n`, false);
      expect(e).toMatchObject({ carriesError: true, text: anthropicOverflow });
    });

    it('a Responses API failure reads as an overflow', () => {
      expect(generalOnly.classifyStreamEvent(body('openai-responses-response-failed-in-stream'))).toMatchObject({
        overlong: true,
        reason: 'context_length',
        rule: 'general_input_over_limit',
      });
    });
  });

  describe('what else the walk keeps and skips', () => {
    it('a truncated pretty-printed body is read as broken JSON, line by line first', () => {
      const cut = body('openai-ctx-messages-plus-completion-pretty').slice(0, 200);
      expect(gatherEvidence(cut, false)).toMatchObject({ carriesError: true, text: cut });
      expect(classifyResponse({ status: 400, body: cut })).toMatchObject({
        overlong: true,
        rule: 'maximum_context_length',
        limits: { limitTokens: 4097 },
      });
    });

    it('a truncated compact Responses error event carries an error by its type', () => {
      const cut = body('openai-responses-error-event-top-level').slice(0, 90);
      expect(cut).not.toContain('"error":');
      expect(gatherEvidence(cut, false).carriesError).toBe(true);
    });

    it('strings in arrays under keys that are not message-like are not text (pydantic loc)', () => {
      expect(gatherEvidence(body('mistral-422-extra-forbidden-max-completion-tokens'), true).text).toBe('Extra inputs are not permitted');
    });

    it('numbers under keys that are not code-like are not codes', () => {
      expect(gatherEvidence(body('llamacpp-exceed-context-size-v1'), true).codes).toEqual(['400', 'exceed_context_size_error']);
    });

    it("JSON followed by LiteLLM's model-group suffix is parsed up to its last brace", () => {
      const llama = body('llamacpp-exceed-context-size-v1');
      const message = `litellm.BadRequestError: OpenAIException - ${llama}. Received Model Group=local-llama\nAvailable Model Group Fallbacks=None`;
      expect(gatherEvidence(JSON.stringify({ error: { message, code: '400' } }), true).fields).toEqual({
        promptTokens: 14429,
        limitTokens: 8192,
      });
    });

    it('null, numbers and booleans in arrays are skipped', () => {
      const b = JSON.stringify([null, 42, true, { error: { message: anthropicOverflow } }]);
      expect(classifyResponse({ status: 400, body: b })).toMatchObject({ overlong: true, rule: 'prompt_too_long' });
    });

    it('object "error" marks an error whose message is an object (Mistral 422)', () => {
      const b = body('mistral-422-extra-forbidden-max-completion-tokens');
      expect(gatherEvidence(b, false).carriesError).toBe(true);
      expect(classifyStreamEvent(b)).toEqual({ overlong: false, rule: 'schema' });
    });

    it('a body with a leading line break is still read as JSON, once', () => {
      const b = `\n${body('groq-ctx')}`;
      expect(gatherEvidence(b, true).codes).toEqual(['invalid_request_error', 'context_length_exceeded']);
    });

    it('an SSE data payload is parsed: only its message is text', () => {
      expect(gatherEvidence(body('tgi-chat-stream-in-band-error'), false).text).toBe(
        'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192. Given: 6204 `inputs` tokens and 2047 `max_new_tokens`',
      );
    });
  });
});
