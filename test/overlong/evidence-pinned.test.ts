import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent, createClassifier } from '../../src/overlong/classify.js';
import { gatherEvidence, MAX_SCAN_CHARS } from '../../src/overlong/evidence.js';
import { fixtures } from '../helpers/fixtures.js';

/** The general layer alone: a classifier with no specific rule. */
const generalOnly = createClassifier([]);

// Issue 15: what evidence.ts extracts, pinned where a change would change a verdict, a rule
// name or the numbers the gateway reads. Bounds are tested at and one step past each limit.
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
    expect(classifyResponse({ status: 400, body: JSON.stringify({ message: 'Rate exceeded' }) })).toEqual({ overlong: false, rule: 'no_signal' });
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

  it('braces that do not parse cost one node, like any other value', () => {
    // The top-level array, the first object, then the codes: 5000 nodes in all.
    const nodes = (codes: number) =>
      JSON.stringify([{ message: 'Upstream said {not json}' }, ...Array.from({ length: codes }, (_, i) => ({ code: `c${i}` }))]);
    expect(gatherEvidence(nodes(4998), true).codes).toHaveLength(4998);
    expect(gatherEvidence(nodes(4999), true).codes).toHaveLength(4998);
  });
});

describe('Python reprs and truncated bodies', () => {
  it('reads quoted codes with or without spaces around the colon, up to 64 characters', () => {
    const repr = (code: string) => JSON.stringify({ error: { message: `OpenAIException - {'error': {'type': 'invalid_request_error', 'code': '${code}'}}` } });
    expect(gatherEvidence(repr('context_length_exceeded'), true).codes).toEqual(['invalid_request_error', 'context_length_exceeded']);
    expect(gatherEvidence(repr('c'.repeat(64)), true).codes).toEqual(['invalid_request_error', 'c'.repeat(64)]);
    expect(gatherEvidence(repr('c'.repeat(65)), true).codes).toEqual(['invalid_request_error']);
    const compact = JSON.stringify({ error: { message: `upstream: {"code":"context_length_exceeded"` } });
    expect(gatherEvidence(compact, true).codes).toEqual(['context_length_exceeded']);
  });

  it('reads quoted params and Invalid paths up to 200 characters', () => {
    const param = (p: string) => JSON.stringify({ error: { message: `{'param': '${p}'}` } });
    expect(gatherEvidence(param('messages'), true).paths).toEqual(['messages']);
    expect(gatherEvidence(param('p'.repeat(200)), true).paths).toEqual(['p'.repeat(200)]);
    expect(gatherEvidence(param('p'.repeat(201)), true).paths).toEqual([]);
    const invalid = (p: string) => JSON.stringify({ error: { message: `Invalid '${p}': string too long.` } });
    expect(gatherEvidence(invalid('p'.repeat(200)), true).paths).toEqual(['p'.repeat(200)]);
    expect(gatherEvidence(invalid('p'.repeat(201)), true).paths).toEqual([]);
  });

  it('looks for an error key in the first 64 KiB of a truncated body', () => {
    const cut = (pad: number) => `{"content": "${'x'.repeat(pad)}", "error": {"message": "prompt is too lo`;
    expect(gatherEvidence(cut(MAX_SCAN_CHARS - 100), false).carriesError).toBe(true);
    expect(gatherEvidence(cut(MAX_SCAN_CHARS), false).carriesError).toBe(false);
  });

  it('a plain-text chunk counts as an error when it says "error" in its first 64 KiB', () => {
    const text = (pad: number) => `${'x'.repeat(pad)} error: the prompt is too long`;
    expect(gatherEvidence(text(MAX_SCAN_CHARS - 100), false).carriesError).toBe(true);
    expect(gatherEvidence(text(MAX_SCAN_CHARS), false).carriesError).toBe(false);
  });
});

describe('message text', () => {
  it('an empty message adds nothing, not even a line break', () => {
    expect(gatherEvidence(JSON.stringify({ error: { message: '', detail: 'second' } }), true).text).toBe('second');
  });

  it('a text that fills the 64 KiB exactly leaves no room for the next', () => {
    const fill = (n: number) => JSON.stringify({ error: { message: 'a'.repeat(n), detail: 'b' } });
    expect(gatherEvidence(fill(MAX_SCAN_CHARS - 1), true).text).toBe('a'.repeat(MAX_SCAN_CHARS - 1));
    expect(gatherEvidence(fill(MAX_SCAN_CHARS - 2), true).text).toBe(`${'a'.repeat(MAX_SCAN_CHARS - 2)}\nb`);
  });
});

describe('node budget', () => {
  it('stops reading an object once 5000 nodes are visited', () => {
    // The top object and `error` are nodes 1 and 2; each empty object one more.
    const wide = (n: number) => JSON.stringify({ error: { ...Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, {}])), code: 'late' } });
    expect(gatherEvidence(wide(4998), true).codes).toEqual(['late']);
    expect(gatherEvidence(wide(4999), true).codes).toEqual([]);
  });

  it('stops reading after an array that used the last node', () => {
    // Nodes 1-3: the top object, `error`, `list`; each empty object one more.
    const list = (n: number) => JSON.stringify({ error: { list: Array.from({ length: n }, () => ({})), code: 'late' } });
    expect(gatherEvidence(list(4997), true).codes).toEqual(['late']);
    expect(gatherEvidence(list(4998), true).codes).toEqual([]);
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
    expect(classifyResponse({ status: 400, body: cut })).toMatchObject({ overlong: true, rule: 'maximum_context_length', limits: { limitTokens: 4097 } });
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

  it('booleans cost no node', () => {
    const wide = (n: number) =>
      JSON.stringify({ error: { stream: false, ...Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, {}])), code: 'late' } });
    expect(gatherEvidence(wide(4998), true).codes).toEqual(['late']);
  });

  it('null fields (OpenAI `"param": null`) cost no node either', () => {
    const wide = (n: number) =>
      JSON.stringify({ error: { param: null, ...Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, {}])), code: 'late' } });
    expect(gatherEvidence(wide(4998), true).codes).toEqual(['late']);
  });

  it('JSON followed by LiteLLM\'s model-group suffix is parsed up to its last brace', () => {
    const llama = body('llamacpp-exceed-context-size-v1');
    const message = `litellm.BadRequestError: OpenAIException - ${llama}. Received Model Group=local-llama\nAvailable Model Group Fallbacks=None`;
    expect(gatherEvidence(JSON.stringify({ error: { message, code: '400' } }), true).fields).toEqual({ promptTokens: 14429, limitTokens: 8192 });
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
