import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent, createClassifier, type Verdict } from '../../src/overlong/classify.js';
import { loadFixtures } from '../../scripts/lofo.js';

// Issue 15: the general layer's answers pinned with the rule name the gateway reports
// (x-compaction header, log) and the reason, on real wordings.
const GENERAL = createClassifier([]);
const byId = new Map(loadFixtures().map((f) => [f.id, f]));
const err = (message: string, extra: Record<string, unknown> = {}) => JSON.stringify({ error: { message, ...extra } });

function general(id: string): Verdict {
  const f = byId.get(id);
  if (f === undefined) throw new Error(`no fixture ${id}`);
  return f.in_stream ? GENERAL.classifyStreamEvent(f.body) : GENERAL.classifyResponse({ status: f.status, body: f.body });
}
const strip = (v: Verdict) => (v.overlong ? { overlong: true, rule: v.rule, reason: v.reason } : v);

describe('which statement decides, and the rule it reports', () => {
  it.each([
    // said with words: the input (prompt, request, ...) over a limit
    ['anthropic-prompt-too-long', 'general_input_over_limit'],
    // "input length and `max_tokens`": both named, read as the input (not the output cap)
    ['anthropic-input-plus-max-tokens', 'general_input_over_limit'],
    // TGI's "`inputs` tokens + `max_new_tokens` must be <= 8192", the input alone under it
    // (6204 + 2047): the relation is read, its subject joins both and is the input, so it is
    // an overflow to rescue, not an output cap
    ['tgi-chat-stream-in-band-error', 'general_input_over_limit'],
    // only a weak noun ("too many tokens: size limit exceeded by 1502 tokens")
    ['cohere-size-limit-exceeded-by', 'general_input_over_limit'],
    // the error code's words: "context length exceeded"
    ['groq-ctx', 'general_input_over_limit'],
    // no relation: the prompt's number over the window's
    ['rkllm-prompt-tokens-but-window', 'general_stated_numbers'],
    // no relation: a requested total over the limit
    ['openai-embeddings-max-tokens-per-request', 'general_stated_numbers'],
    ['cerebras-current-length-over-limit', 'general_stated_numbers'],
  ])('%s: %s', (id, rule) => {
    expect(strip(general(id))).toEqual({ overlong: true, rule, reason: 'context_length' });
  });

  it.each([
    ['openai-max-tokens-too-large', 'output_token_cap'],
    ['anthropic-image-exceeds-5mb', 'attachment_limit'],
  ])('%s: %s, with no reason', (id, rule) => {
    expect(general(id)).toEqual({ overlong: false, rule });
  });

  it('advice to shorten, when nothing else is said', () => {
    expect(strip(GENERAL.classifyResponse({ status: 400, body: err('Please reduce the length of the messages.') }))).toEqual({
      overlong: true,
      rule: 'general_shorten_advice',
      reason: 'context_length',
    });
  });
});

describe('body size or context: the words around the relation', () => {
  it.each([
    // Gemini API
    ['Request payload size exceeds the limit: 10485760 bytes.', 'body_too_large'],
    // AWS Lambda Invoke (RequestTooLargeException)
    ['Request must be smaller than 6291456 bytes for the InvokeFunction operation', 'body_too_large'],
    // Kong: no unit at all
    ['Request size limit exceeded', 'context_length'],
    // GitHub Models (sent with a 413; here as any other status would carry it): a body word and a context word
    ['Request body too large for gpt-4 model. Max size: 8000 tokens.', 'context_length'],
  ])('%s -> %s', (message, reason) => {
    expect(strip(GENERAL.classifyResponse({ status: 400, body: err(message) }))).toEqual({ overlong: true, rule: 'general_input_over_limit', reason });
  });

  it('a relation in capitals at the start (AWS Lambda "Request Too Long") needs no limit after it', () => {
    expect(strip(GENERAL.classifyResponse({ status: 400, body: JSON.stringify({ message: 'Request Too Long' }) }))).toEqual({
      overlong: true,
      rule: 'general_input_over_limit',
      reason: 'context_length',
    });
  });

  it('a body over its byte limit by the numbers alone', () => {
    const v = GENERAL.classifyResponse({ status: 400, body: err('Request rejected: body size 2097152 bytes, limit 1048576 bytes') });
    expect(strip(v)).toEqual({ overlong: true, rule: 'general_stated_numbers', reason: 'body_too_large' });
  });
});

describe('HTML entities are decoded before the text is read', () => {
  it('&gt; in "A + B > C"', () => {
    const page = '<html><body><p>input length and `max_tokens` exceed context limit: 180000 + 64000 &gt; 200000, decrease input length or `max_tokens` and try again</p></body></html>';
    expect(GENERAL.classifyResponse({ status: 502, body: page })).toEqual({
      overlong: true,
      reason: 'context_length',
      limits: { promptTokens: 180000, completionTokens: 64000, limitTokens: 200000, completionCounted: true },
      rule: 'general_input_over_limit',
    });
  });
});

describe('vetoes read from the error code alone', () => {
  it('Google DEADLINE_EXCEEDED is a timeout', () => {
    const body = JSON.stringify({ error: { code: 504, message: 'Deadline expired before operation could complete.', status: 'DEADLINE_EXCEEDED' } });
    expect(classifyResponse({ status: 504, body })).toEqual({ overlong: false, rule: 'timeout' });
  });

  it('Gemini RESOURCE_EXHAUSTED in a stream is a rate limit, before the quota its text names', () => {
    const body = JSON.stringify({ error: { code: 429, message: 'Resource has been exhausted (e.g. check quota).', status: 'RESOURCE_EXHAUSTED' } });
    expect(classifyStreamEvent(body)).toEqual({ overlong: false, rule: 'rate_limit' });
  });

  it('OpenAI model_not_found on a deprecated model', () => {
    const body = err('The model `text-davinci-003` has been deprecated, learn more here: https://platform.openai.com/docs/deprecations', {
      type: 'invalid_request_error',
      param: null,
      code: 'model_not_found',
    });
    expect(classifyResponse({ status: 404, body })).toEqual({ overlong: false, rule: 'model_not_found' });
  });
});

describe('vetoes read from the text, one alternative at a time', () => {
  it.each([
    // LiteLLM names the exception class: "RateLimit" without a space, before the quota its text names
    ['rate_limit', 'litellm.RateLimitError: VertexAIException - Resource has been exhausted (e.g. check quota).'],
    // AWS Bedrock AccessDeniedException
    ['auth', 'User: arn:aws:iam::123456789012:user/dev is not authorized to perform: bedrock:InvokeModel on resource: arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-5-sonnet-20240620-v1:0'],
    // OpenAI o1 models
    ['schema', "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."],
    // Zod (TypeScript servers)
    ['schema', "Unrecognized key(s) in object: 'max_completion_tokens'"],
  ])('%s: %s', (rule, message) => {
    expect(GENERAL.classifyResponse({ status: 400, body: err(message) })).toEqual({ overlong: false, rule });
  });
});
