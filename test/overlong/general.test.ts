import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent, createClassifier, type Classifier, type Verdict } from '../../src/overlong/classify.js';
import { loadFixtures } from '../../scripts/lofo.js';
import { VETO_CODES } from '../helpers/veto-codes.js';

// The general layer, alone and behind the specific rules: what a user would see is whether the
// gateway compacts (overlong) or passes the error on, and the numbers the size target reads.
const GENERAL = createClassifier([]);
const MODES: [string, Classifier][] = [
  ['all rules', { classifyResponse, classifyStreamEvent }],
  ['general layer only', GENERAL],
];
const byId = new Map(loadFixtures().map((f) => [f.id, f]));

function fixtureVerdict(id: string, classifier: Classifier = { classifyResponse, classifyStreamEvent }): Verdict {
  const f = byId.get(id);
  if (f === undefined) throw new Error(`no fixture ${id}`);
  return f.in_stream ? classifier.classifyStreamEvent(f.body) : classifier.classifyResponse({ status: f.status, body: f.body });
}

const err = (message: string, extra: Record<string, unknown> = {}) => JSON.stringify({ error: { message, ...extra } });

describe.each(MODES)('the Responses and Messages APIs (%s)', (_mode, classifier) => {
  const responsesMessage = 'Your input exceeds the context window of this model. Please adjust your input and try again.';

  it('reads a response.failed event passed as one event payload', () => {
    const data = JSON.stringify({
      type: 'response.failed',
      sequence_number: 2,
      response: {
        id: 'resp_1',
        object: 'response',
        status: 'failed',
        error: { code: 'context_length_exceeded', message: responsesMessage },
      },
    });
    expect(classifier.classifyStreamEvent(data)).toMatchObject({ overlong: true, reason: 'context_length' });
  });

  it('reads a top-level error event and a 400', () => {
    const event = JSON.stringify({
      type: 'error',
      code: 'context_length_exceeded',
      message: responsesMessage,
      param: 'input',
      sequence_number: 1,
    });
    expect(classifier.classifyStreamEvent(event)).toMatchObject({ overlong: true });
    const body = JSON.stringify({
      error: { message: responsesMessage, type: 'invalid_request_error', param: 'input', code: 'context_length_exceeded' },
    });
    expect(classifier.classifyResponse({ status: 400, body })).toMatchObject({ overlong: true, reason: 'context_length' });
  });

  it('passes a completed response whose error is null', () => {
    const data = JSON.stringify({ type: 'response.completed', response: { id: 'resp_2', status: 'completed', error: null, output: [] } });
    expect(classifier.classifyStreamEvent(data).overlong).toBe(false);
  });

  it('reads an Anthropic prompt-too-long 400 with its numbers, and no completion counted', () => {
    const body = JSON.stringify({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'prompt is too long: 212000 tokens > 200000 maximum' },
      request_id: 'req_1',
    });
    const verdict = classifier.classifyResponse({ status: 400, body });
    expect(verdict).toMatchObject({ overlong: true, reason: 'context_length' });
    if (verdict.overlong) expect(verdict.limits).toEqual({ promptTokens: 212000, limitTokens: 200000 });
  });

  it('reads input + max_tokens over the window as overlong, with the completion counted', () => {
    const message =
      'input length and `max_tokens` exceed context limit: 180000 + 64000 > 200000, decrease input length or `max_tokens` and try again';
    const body = JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message } });
    const verdict = classifier.classifyResponse({ status: 400, body });
    expect(verdict).toMatchObject({ overlong: true, reason: 'context_length' });
    if (verdict.overlong) {
      expect(verdict.limits).toEqual({ promptTokens: 180000, completionTokens: 64000, limitTokens: 200000, completionCounted: true });
    }
  });

  it('calls a 413 request_too_large a body-size rejection', () => {
    const body = JSON.stringify({
      type: 'error',
      error: { type: 'request_too_large', message: 'Request exceeds the maximum allowed number of bytes.' },
    });
    expect(classifier.classifyResponse({ status: 413, body })).toMatchObject({ overlong: true, reason: 'body_too_large' });
    expect(classifier.classifyResponse({ status: 400, body })).toMatchObject({ overlong: true, reason: 'body_too_large' });
  });

  it('passes an in-stream overloaded error and reads an in-stream prompt too long', () => {
    const overloaded = JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
    expect(classifier.classifyStreamEvent(overloaded)).toEqual({ overlong: false, rule: 'overloaded' });
    const tooLong = JSON.stringify({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'prompt is too long: 250000 tokens > 200000 maximum' },
    });
    expect(classifier.classifyStreamEvent(tooLong)).toMatchObject({ overlong: true });
    expect(classifier.classifyStreamEvent(`event: error\ndata: ${tooLong}\n\n`)).toMatchObject({ overlong: true });
  });
});

describe('the general layer reads the numbers of errors it has no rule for', () => {
  it.each([
    ['zhipu-anthropic-compat-1210-input-tokens-exceeds', { promptTokens: 182387, limitTokens: 202750 }],
    ['volcengine-ark-input-length-exceeds-maximum', { promptTokens: 203743, limitTokens: 202752 }],
    ['mistral-embed-too-many-tokens-in-batch', { limitTokens: 16384 }],
    ['hf-inference-inputs-plus-max-new-tokens', { limitTokens: 4096, promptTokens: 8740, completionTokens: 500, completionCounted: true }],
    ['ds4-context-exceeded-fields', { promptTokens: 40321, limitTokens: 32768 }],
    ['vllm-v1-decoder-prompt-longer-than-max-model-len', { promptTokens: 17772, limitTokens: 16384 }],
    ['vllm-prompt-too-long-to-fit-multimodal', { limitTokens: 4096 }],
    ['rkllm-prompt-tokens-but-window', { promptTokens: 11543, limitTokens: 4096 }],
    ['bedrock-validation-model-returned-prompt-too-long', { promptTokens: 200049, limitTokens: 200000 }],
    [
      'litellm-anthropic-bytes-repr-input-plus-max-tokens',
      { promptTokens: 174167, completionTokens: 64000, limitTokens: 200000, completionCounted: true },
    ],
    ['cohere-size-limit-exceeded-by', {}],
    ['tgi-inputs-must-have-less-than', { limitTokens: 2048 }],
    ['lmstudio-input-length-exceeds-context-length', { promptTokens: 6491, limitTokens: 1500 }],
    ['llama-cpp-python-requested-tokens-exceed-context-window', { limitTokens: 2048 }],
    [
      'openai-ctx-messages-plus-completion-pretty',
      { limitTokens: 4097, promptTokens: 3120, completionTokens: 1000, completionCounted: true },
    ],
    ['gemini-413-max-request-body-size', { limitBytes: 1048576, bodyBytes: 1056562 }],
    ['cohere-too-many-tokens', { limitTokens: 2048, completionCounted: true }],
    ['lmstudio-n-keep-gt-n-ctx', { promptTokens: 13055, limitTokens: 4096 }],
    ['xai-maximum-prompt-length', { limitTokens: 131072, promptTokens: 136973 }],
    ['vertex-unable-to-submit-input-token-count', { promptTokens: 1251952, limitTokens: 1048576 }],
  ])('%s', (id, limits) => {
    const verdict = fixtureVerdict(id, GENERAL);
    expect(verdict.overlong, verdict.rule).toBe(true);
    if (verdict.overlong) expect(verdict.limits).toEqual(limits);
  });

  it('decides completion_fills_window from the numbers alone', () => {
    for (const id of [
      'vllm-max-tokens-too-large-mentions-context-length',
      'vllm-max-tokens-equals-window-input-text',
      'openrouter-output-reservation-equals-window',
      'azure-completion-alone-exceeds-window',
      'sglang-requested-token-count-completion-fills-window',
      'together-inputs-plus-max-new-tokens-no-room',
    ]) {
      expect(fixtureVerdict(id, GENERAL), id).toEqual({ overlong: false, rule: 'completion_fills_window' });
    }
  });

  it('marks completionCounted only when a completion is counted', () => {
    const counted = classifyResponse({
      status: 400,
      body: err(
        "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (8000 in the messages, 1000 in the completion).",
      ),
    });
    expect(counted).toMatchObject({ overlong: true, limits: { completionCounted: true, completionTokens: 1000 } });
    const promptOnly = GENERAL.classifyResponse({ status: 400, body: err('Prompt tokens (9000) exceed the context size (8192).') });
    expect(promptOnly).toMatchObject({ overlong: true, limits: { promptTokens: 9000, limitTokens: 8192 } });
    if (promptOnly.overlong) expect(promptOnly.limits.completionCounted).toBeUndefined();
  });

  it('reads "A + B > C" and "B > C - A" as input and completion against the window', () => {
    const sum = GENERAL.classifyResponse({ status: 400, body: err('request too big: 5000 + 3000 > 7000 tokens') });
    expect(sum).toMatchObject({ limits: { promptTokens: 5000, completionTokens: 3000, limitTokens: 7000, completionCounted: true } });
    const room = GENERAL.classifyResponse({ status: 400, body: err('input tokens do not fit (3000 > 8000 - 6000)') });
    expect(room).toMatchObject({ limits: { completionTokens: 3000, limitTokens: 8000, promptTokens: 6000 } });
  });

  it('reads thousands separators and ignores identifiers, codes and floors', () => {
    const v = GENERAL.classifyResponse({
      status: 400,
      body: err('gpt-4 says: the prompt (210,000 tokens) is longer than the 200,000 token context window'),
    });
    expect(v).toMatchObject({ overlong: true, limits: { promptTokens: 210000, limitTokens: 200000 } });
    const floor = GENERAL.classifyResponse({ status: 400, body: err('max_tokens must be at least 1 and the prompt is too long') });
    expect(floor).toMatchObject({ overlong: true, limits: {} });
    const code = GENERAL.classifyResponse({ status: 400, body: err('context window exceeds limit (2013)') });
    expect(code).toMatchObject({ overlong: true, limits: {} });
  });
});

describe('vetoes settle "not overlong" before anything else', () => {
  it.each([
    ['rate_limit', 'Rate limit reached for requests; your prompt is too long for this tier'],
    ['rate_limit', 'too many tokens, please wait a moment'],
    ['rate_limit', 'Throttled: the input token count exceeds the maximum allowed per request window'],
    ['rate_limit', 'Request too large on tokens per min (TPM): Limit 6000, Requested 9000'],
    ['rate_limit', 'prompt is too long right now, try again later'],
    ['quota', 'You exceeded your current quota: the prompt is too long'],
    ['billing', 'This request requires more credits, or fewer max_tokens. You requested up to 65536 tokens'],
    ['billing', 'The long context beta is not yet available for this subscription.'],
    ['billing', 'Prompt tokens limit exceeded: 230799 > 91442. Create a key with a higher monthly limit'],
    ['auth', 'Invalid API key: the prompt is too long to authenticate'],
    ['content_filter', "The prompt triggered Azure OpenAI's content management policy; input too long"],
    ['model_not_found', 'The model `gpt-9` does not exist; maximum context length is 4096 tokens'],
    ['schema', 'Extra inputs are not permitted: the input exceeds the maximum context length'],
    ['overloaded', 'Overloaded: context length exceeded on a busy replica'],
    ['timeout', 'context deadline exceeded'],
    ['timeout', 'upstream timed out while the prompt was too long to stream'],
    ['capacity', 'request limit reached (5/5): too many tokens in flight for this model'],
    ['capacity', 'Max parallel request limit reached. The request exceeds the maximum allowed'],
    ['capacity', 'Concurrent requests limit exceeded for this key; the prompt is over the limit'],
    ['capacity', 'ResourceExhausted: the input exceeds the maximum number of tokens'],
    ['capacity', 'provider_unavailable: the request exceeds the maximum context length of a replica'],
  ])('%s: %s', (rule, message) => {
    expect(classifyResponse({ status: 400, body: err(message) })).toEqual({ overlong: false, rule });
    expect(GENERAL.classifyResponse({ status: 500, body: err(message) })).toEqual({ overlong: false, rule });
  });

  it('a field\u2019s size rule is never an overflow: a name or an id named as the subject, or a path to a field that is not the conversation', () => {
    for (const message of [
      'The length of the tool name cannot exceed 64.',
      'Function name can not be longer than 64 characters but has 65 characters.',
      'tool_use.id: String should have at most 64 characters',
    ]) {
      expect(GENERAL.classifyResponse({ status: 400, body: err(message) })).toMatchObject({ overlong: false });
    }
    const onPath = (param: string, message: string) => GENERAL.classifyResponse({ status: 400, body: err(message, { param }) });
    expect(
      onPath(
        'tools',
        "Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 133 instead.",
      ),
    ).toEqual({ overlong: false, rule: 'schema_field_size' });
    expect(
      onPath(
        'max_output_tokens',
        "Invalid 'max_output_tokens': integer above maximum value. Expected a value <= 128000, but got 200000 instead.",
      ),
    ).toEqual({ overlong: false, rule: 'completion_value_cap' });
    // The conversation's own size is one: the path names it.
    expect(onPath('messages', 'The request exceeds the maximum length of 128000 tokens.')).toMatchObject({ overlong: true });
    expect(
      onPath(
        'input',
        "Invalid 'input': array too long. Expected an array with maximum length 2048, but got an array with length 4000 instead.",
      ),
    ).toMatchObject({ overlong: true });
  });

  it.each(VETO_CODES)('the code %s alone vetoes a text that reads as an overflow', (code, rule) => {
    const body = err('This request exceeds the maximum number of tokens allowed per request', { code });
    expect(classifyResponse({ status: 400, body })).toEqual({ overlong: false, rule });
  });

  it('a 413 is a body-size rejection unless a code or its text says rate limit or quota', () => {
    expect(classifyResponse({ status: 413, body: err('Request too large', { code: 'rate_limit_exceeded' }) })).toEqual({
      overlong: false,
      rule: 'rate_limit',
    });
    expect(classifyResponse({ status: 413, body: err('Request too large', { code: 'insufficient_quota' }) })).toEqual({
      overlong: false,
      rule: 'quota',
    });
    expect(classifyResponse({ status: 413, body: err('monthly quota exceeded') })).toEqual({ overlong: false, rule: 'quota' });
    // Other vetoes do not turn a 413 around: the body was too big whatever else it says.
    expect(classifyResponse({ status: 413, body: err('Payload too large', { code: 'content_filter' }) })).toMatchObject({
      overlong: true,
      reason: 'body_too_large',
    });
  });
});

describe('what is too big decides', () => {
  it.each([
    ['max_tokens is too large: 9000. This model supports at most 4096 completion tokens'],
    ['`max_new_tokens` must be less than or equal to 2048'],
    ['max_output_tokens exceeds the model limit of 8192'],
    ['maxOutputTokens is larger than the maximum of 65536'],
    ['The maximum tokens you requested exceeds the model limit of 4096'],
    ['Output tokens are too many: requested 100000, at most 32000'],
  ])('the output: %s', (message) => {
    expect(GENERAL.classifyResponse({ status: 400, body: err(message) })).toEqual({ overlong: false, rule: 'output_token_cap' });
  });

  it('an attachment over its own limit', () => {
    const body = err('messages.0.content.2.image.source.base64: image exceeds 5 MB maximum: 15908784 bytes > 5242880 bytes');
    expect(GENERAL.classifyResponse({ status: 400, body })).toEqual({ overlong: false, rule: 'attachment_limit' });
  });

  it.each([
    ['Prompt exceeds max length'],
    ['The conversation is too long for this model'],
    ['context_length_exceeded'],
    ['The request (9000 tokens) exceeds the available context size (8192 tokens)'],
    ['Input is longer than the model maximum of 32768 tokens'],
    ['too many tokens: size limit exceeded by 1502 tokens'],
    ['Error: your messages are above the maximum context length'],
    ['history overflows the context window'],
    ['Request payload size exceeds the limit of 10485760 bytes'],
  ])('the input: %s', (message) => {
    expect(GENERAL.classifyResponse({ status: 400, body: err(message) })).toMatchObject({ overlong: true });
  });

  it.each([
    ['context'],
    ['too long'],
    ['Request too long ago'],
    ['token limit'],
    ['The context is invalid'],
    ['Invalid value for temperature: 3 is greater than the maximum of 2'],
  ])('no bare word decides: %s', (message) => {
    expect(GENERAL.classifyResponse({ status: 400, body: err(message) }).overlong).toBe(false);
  });

  it('reads advice to shorten the input as an overflow when nothing else is said', () => {
    expect(GENERAL.classifyResponse({ status: 400, body: err('Please reduce the length of the messages.') })).toEqual(
      expect.objectContaining({ overlong: true, rule: 'general_shorten_advice' }),
    );
  });

  it('reads a body over its byte limit from the numbers alone', () => {
    const body = err('Request rejected: body size 2097152 bytes, limit 1048576 bytes');
    expect(GENERAL.classifyResponse({ status: 400, body })).toMatchObject({
      overlong: true,
      reason: 'body_too_large',
      limits: { bodyBytes: 2097152, limitBytes: 1048576 },
    });
  });
});

describe('any status, any envelope', () => {
  const message = 'The input (40000 tokens) is longer than the context length (32768 tokens).';

  it.each([500, 502, 503, 400, 422, 404])('a %i whose text states an overflow is one', (status) => {
    expect(GENERAL.classifyResponse({ status, body: err(message) })).toMatchObject({ overlong: true, reason: 'context_length' });
  });

  it('a 429 never is, a 200 only with an error object', () => {
    expect(classifyResponse({ status: 429, body: err(message) })).toEqual({ overlong: false, rule: 'status_429' });
    expect(GENERAL.classifyResponse({ status: 200, body: err(message) })).toMatchObject({ overlong: true });
    expect(GENERAL.classifyResponse({ status: 200, body: JSON.stringify({ choices: [{ message: { content: message } }] }) }).overlong).toBe(
      false,
    );
  });

  it.each([
    ['flat message', JSON.stringify({ message })],
    ['error string', JSON.stringify({ error: message })],
    ['code and message', JSON.stringify({ code: 400, message })],
    ['array', JSON.stringify([{ error: { code: 400, message } }])],
    ['double-encoded string', JSON.stringify(JSON.stringify({ error: { message } }))],
    ['JSON inside a message', JSON.stringify({ error: { message: `ProviderError: ${JSON.stringify({ error: { message } })}` } })],
    ['HTML page', `<html><head><title>400</title></head><body><h1>Bad request</h1><p>${message.replace('(', '&#40;')}</p></body></html>`],
    ['HTML entities', `<p>The model&#39;s input (40000 tokens) is longer than the context length (32768 tokens).</p>`],
    ['plain text', message],
    ['SSE error frame', `event: error\ndata: ${JSON.stringify({ type: 'error', error: { message } })}\n\n`],
  ])('%s', (_name, body) => {
    expect(GENERAL.classifyResponse({ status: 400, body })).toMatchObject({ overlong: true });
  });
});

describe('the rule each general reading reports (the x-compaction header, the log), on real wordings', () => {
  const general = (id: string): Verdict => fixtureVerdict(id, GENERAL);
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
      expect(strip(GENERAL.classifyResponse({ status: 400, body: err(message) }))).toEqual({
        overlong: true,
        rule: 'general_input_over_limit',
        reason,
      });
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
      const page =
        '<html><body><p>input length and `max_tokens` exceed context limit: 180000 + 64000 &gt; 200000, decrease input length or `max_tokens` and try again</p></body></html>';
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
      const body = JSON.stringify({
        error: { code: 504, message: 'Deadline expired before operation could complete.', status: 'DEADLINE_EXCEEDED' },
      });
      expect(classifyResponse({ status: 504, body })).toEqual({ overlong: false, rule: 'timeout' });
    });

    it('Gemini RESOURCE_EXHAUSTED in a stream is a rate limit, before the quota its text names', () => {
      const body = JSON.stringify({
        error: { code: 429, message: 'Resource has been exhausted (e.g. check quota).', status: 'RESOURCE_EXHAUSTED' },
      });
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
      [
        'auth',
        'User: arn:aws:iam::123456789012:user/dev is not authorized to perform: bedrock:InvokeModel on resource: arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-5-sonnet-20240620-v1:0',
      ],
      // OpenAI o1 models
      ['schema', "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."],
      // Zod (TypeScript servers)
      ['schema', "Unrecognized key(s) in object: 'max_completion_tokens'"],
    ])('%s: %s', (rule, message) => {
      expect(GENERAL.classifyResponse({ status: 400, body: err(message) })).toEqual({ overlong: false, rule });
    });
  });
});
