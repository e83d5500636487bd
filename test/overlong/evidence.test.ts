import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent } from '../../src/overlong/classify.js';
import { gatherEvidence } from '../../src/overlong/evidence.js';

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
  it('the paths an error blames: param, quoted param, Invalid \'x\'', () => {
    const e = gatherEvidence(JSON.stringify({ error: { message: "Invalid 'messages[2].content': string too long. {'param': 'input[0]'}", param: 'messages[2].content' } }), true);
    expect(e.paths).toEqual(['input[0]', 'messages[2].content', 'messages[2].content']);
  });

  it('string_above_max_length on a message name is a schema error; on content, an overflow', () => {
    const on = (param: string) => JSON.stringify({ error: { message: `Invalid '${param}': string too long.`, code: 'string_above_max_length', param } });
    expect(classifyResponse({ status: 400, body: on('messages[3].name') })).toEqual({ overlong: false, rule: 'schema_string_too_long' });
    expect(classifyResponse({ status: 400, body: on('messages[3].content') })).toMatchObject({ overlong: true, rule: 'string_above_max_length' });
    expect(classifyResponse({ status: 400, body: on('temperature_notes') })).toEqual({ overlong: false, rule: 'schema_string_too_long' });
    const fromMessage = JSON.stringify({ error: { message: "Invalid 'input[0].content': string too long.", code: 'string_above_max_length' } });
    expect(classifyResponse({ status: 400, body: fromMessage })).toMatchObject({ overlong: true });
  });

  it('numeric fields: the first non-negative integer of each', () => {
    const e = gatherEvidence(JSON.stringify([{ error: { n_ctx: -1, n_prompt_tokens: 1.5 } }, { error: { n_ctx: 4096, n_prompt_tokens: 5000 } }, { error: { n_ctx: 1 } }]), true);
    expect(e.fields).toEqual({ limitTokens: 4096, promptTokens: 5000 });
  });

  it('numeric codes and code-like keys', () => {
    const e = gatherEvidence(JSON.stringify({ error: { code: 400, type: 'Invalid_Request', status: 'FAILED', __type: 'ValidationException', reason: 'badRequest', error_code: 'E1' } }), true);
    expect(e.codes).toEqual(['400', 'invalid_request', 'failed', 'validationexception', 'badrequest', 'e1']);
  });

  it('text from message-like keys only, and arrays of them', () => {
    const e = gatherEvidence(JSON.stringify({ error: { message: 'a', detail: ['b', { msg: 'c' }], hint: 'not text', title: 'd' } }), true);
    expect(e.text).toBe('a\nb\nc\nd');
  });
});

describe('streams', () => {
  it('reads a last event without its closing blank line', () => {
    expect(classifyStreamEvent(`event: error\ndata: ${JSON.stringify({ error: { message: overflow } })}`)).toMatchObject({ overlong: true });
  });

  it('skips [DONE] and empty data', () => {
    expect(gatherEvidence('data: [DONE]\n\ndata: \n\n', false)).toMatchObject({ codes: [], text: '', carriesError: false });
  });

  it('an event named error marks the chunk an error even with non-JSON data', () => {
    expect(gatherEvidence('event: ERROR\ndata: upstream failed\n\n', false)).toMatchObject({ carriesError: true, text: 'upstream failed' });
    expect(gatherEvidence('event: message\ndata: upstream failed\n\n', false)).toMatchObject({ carriesError: false, text: '' });
  });

  it('a truncated JSON payload in a data line is read as text', () => {
    expect(gatherEvidence('data: {"error":{"message":"prompt is too lo', false)).toMatchObject({ carriesError: true, text: '{"error":{"message":"prompt is too lo' });
  });
});
