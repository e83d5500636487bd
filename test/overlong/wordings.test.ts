import { describe, expect, it } from 'vitest';
import { createClassifier, type Verdict } from '../../src/overlong/classify.js';

/** The general layer alone: a classifier with no specific rule. */
const generalOnly = createClassifier([]);

// One wording per way the general layer can be told something, read with the general layer
// alone: each alternative of each veto, noun and relation decides at least one case here.
const general = (message: string): Verdict => generalOnly.classifyResponse({ status: 400, body: JSON.stringify({ error: { message } }) });

describe('each veto wording', () => {
  it.each([
    ['rate_limit', 'Too many requests: the prompt is too long'],
    ['rate_limit', 'Reduce the request rate; the prompt is too long'],
    ['rate_limit', 'Limit of 100 per-hour reached: prompt is too long'],
    ['rate_limit', 'Tokens per day exhausted: prompt is too long'],
    ['rate_limit', 'ITPM reached: the prompt is too long'],
    ['rate_limit', 'Retry-After: 30. The prompt is too long'],
    ['rate_limit', 'The prompt is too long, retry again in 5 seconds'],
    ['rate_limit', 'Slow down: the prompt is too long'],
    ['rate_limit', 'RESOURCE_EXHAUSTED: the prompt is too long'],
    ['billing', 'Billing hard limit reached: the prompt is too long'],
    ['billing', 'Payment required: the prompt is too long'],
    ['billing', 'Your credit balance is too low to send a prompt this long'],
    ['billing', 'Insufficient balance: the prompt is too long'],
    ['billing', 'Extra usage is off: the prompt is too long'],
    ['billing', 'Upgrade your account: the prompt is too long'],
    ['billing', 'Your plan allows shorter prompts: the prompt is too long'],
    ['billing', '1M context is not available for this organization: the prompt is too long'],
    ['auth', 'Unauthorized: the prompt is too long'],
    ['auth', 'Permission denied: the prompt is too long'],
    ['auth', 'Access denied: the prompt is too long'],
    ['auth', 'Missing api key: the prompt is too long'],
    ['content_filter', 'Blocked by the safety system: the prompt is too long'],
    ['content_filter', 'The input was flagged: the prompt is too long'],
    ['content_filter', 'Responsible AI policy: the prompt is too long'],
    ['content_filter', 'Prohibited content: the prompt is too long'],
    ['model_not_found', 'model_not_found: the prompt is too long'],
    ['model_not_found', 'No such model: the prompt is too long'],
    ['model_not_found', 'Unknown model llama-9: the prompt is too long'],
    ['model_not_found', 'The model llama-9 is not supported: the prompt is too long'],
    ['schema', 'Unknown field "foo": the prompt is too long'],
    ['schema', 'Invalid type for messages: the prompt is too long'],
    ['schema', 'Input should be a valid string: the prompt is too long'],
    ['schema', 'Expected an object, got a string: the prompt is too long'],
    ['schema', 'Missing required parameter: the prompt is too long'],
    ['schema', 'messages: field required; the prompt is too long'],
    ['schema', 'temperature must be a number; the prompt is too long'],
    ['schema', "'model' is a required property; the prompt is too long"],
    ['overloaded', 'The service is at capacity: the prompt is too long'],
    ['overloaded', 'Temporarily unavailable: the prompt is too long'],
    ['timeout', 'context canceled: the prompt is too long'],
    ['timeout', 'Gateway timeout: the prompt is too long'],
  ])('%s: %s', (rule, message) => {
    expect(general(message)).toEqual({ overlong: false, rule });
  });
});

describe('each way of saying the input is over a limit', () => {
  it.each([
    ['The prompt is too large'],
    ['The inputs are too big'],
    ['input_ids is too long'],
    ['The requests are too large for this model'],
    ['Your message is too long'],
    ['The conversation overflows the window'],
    ['The history overflowed'],
    ['Query too long'],
    ['Prompt exceeding the maximum context length'],
    ['The prompt is larger than the model allows'],
    ['The prompt is greater than the context size'],
    ['The prompt is bigger than the window'],
    ['The prompt is more than the maximum'],
    ['The prompt is over the limit'],
    ['The prompt length is outside the valid range for this model'],
    ['prompt tokens must be fewer than 4096'],
    ['prompt tokens must be shorter than the window'],
    ['prompt tokens must be lower than 4096'],
    ['prompt tokens must be smaller than 4096'],
    ['prompt length must be at most 4096'],
    ['prompt length must be no more than 4096'],
    ['prompt length must not exceed 4096'],
    ["prompt length can't exceed 4096"],
    ['prompt length can not exceed 4096'],
    ['prompt length should be [1, 4096]'],
    ['the prompt >= the n ctx of the model'],
  ])('%s', (message) => {
    expect(general(message)).toMatchObject({ overlong: true, reason: 'context_length' });
  });

  it.each([['the text is too long'], ['the sequence is too long'], ['the token count is too large'], ['10000 characters is too long']])(
    'a weak subject still counts: %s',
    (message) => {
      expect(general(message)).toMatchObject({ overlong: true, rule: 'general_input_over_limit' });
    },
  );

  it.each([['Request entity too large'], ['The payload exceeds the limit'], ['The body is too large'], ['Payload exceeds 10 MB']])(
    'a body: %s',
    (message) => {
      expect(general(message)).toMatchObject({ overlong: true, reason: 'body_too_large' });
    },
  );

  it.each([
    ['Please shorten your messages'],
    ['Try to decrease the conversation history'],
    ['Trim the input and retry'],
    ['Truncate the prompt'],
    ['Use a smaller context'],
    ['Send fewer inputs'],
    ['Try increasing the context size'],
    ['Use the "middle-out" transform'],
    ['Set prompt_truncation to AUTO'],
  ])('advice to shorten: %s', (message) => {
    expect(general(message)).toEqual(expect.objectContaining({ overlong: true, rule: 'general_shorten_advice' }));
  });
});

describe('each way of saying the output or an attachment is too big', () => {
  it.each([
    ['num_predict is too large'],
    ['max_tokens_to_sample is too large'],
    ['The completion is too long for this model'],
    ['The generation exceeds the maximum'],
    ['The prediction is too long'],
    ['maxTokens is larger than 8192'],
  ])('output: %s', (message) => {
    expect(general(message)).toEqual({ overlong: false, rule: 'output_token_cap' });
  });

  it.each([
    ['The PDF is too large'],
    ['The file exceeds the maximum size'],
    ['The audio is too long'],
    ['The video exceeds 20 MB'],
    ['The attachment is too big'],
    ['The document exceeds the limit'],
    ['Too many pixels: the image is larger than 8000 pixels'],
  ])('attachment: %s', (message) => {
    expect(general(message)).toEqual({ overlong: false, rule: 'attachment_limit' });
  });

  it.each([['The temperature is above the range'], ['top_p is greater than 1'], ['Request too long ago']])('not a size: %s', (message) => {
    expect(general(message).overlong).toBe(false);
  });
});
