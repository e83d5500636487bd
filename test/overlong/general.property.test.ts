import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent, createClassifier, type Classifier } from '../../src/overlong/classify.js';

// Issue 12's properties: the numbers, the envelope and the wrapping depth of an overflow never
// change its verdict, and a vetoed error stays vetoed whatever overflow words surround it.
const SEED = 20261201;
const RUNS = 100;
const MODES: [string, Classifier][] = [
  ['all rules', { classifyResponse, classifyStreamEvent }],
  ['general layer only', createClassifier([])],
];

/** An overflow whose completion leaves real room: limit L, prompt P > L, completion C. */
const overflowNumbers = fc.integer({ min: 4096, max: 2_000_000 }).chain((limit) =>
  fc.record({
    limit: fc.constant(limit),
    prompt: fc.integer({ min: limit + 1, max: limit * 3 }),
    completion: fc.integer({ min: 0, max: Math.floor(limit / 4) }),
  }),
);

type Numbers = { limit: number; prompt: number; completion: number };
const OVERFLOW_WORDINGS: ((n: Numbers) => string)[] = [
  (n) =>
    `This model's maximum context length is ${n.limit} tokens. However, your messages resulted in ${n.prompt} tokens. Please reduce the length of the messages.`,
  (n) =>
    `This model's maximum context length is ${n.limit} tokens. However, you requested ${n.prompt + n.completion} tokens (${n.prompt} in the messages, ${n.completion} in the completion).`,
  (n) => `prompt is too long: ${n.prompt} tokens > ${n.limit} maximum`,
  (n) =>
    `input length and \`max_tokens\` exceed context limit: ${n.prompt} + ${n.completion} > ${n.limit}, decrease input length or \`max_tokens\` and try again`,
  (n) => `The input token count (${n.prompt}) exceeds the maximum number of tokens allowed (${n.limit}).`,
  (n) => `The input (${n.prompt} tokens) is longer than the model's context length (${n.limit} tokens).`,
  (n) => `Input length ${n.prompt} exceeds the maximum length ${n.limit}`,
  (n) => `Request ${n.prompt} input tokens exceeds the model's maximum context length ${n.limit}`,
  (n) => `the request (${n.prompt} tokens) exceeds the available context size (${n.limit} tokens), try increasing it`,
  (n) => `Prompt is ${n.prompt} tokens but the model context window is ${n.limit} tokens.`,
  (n) =>
    `Input validation error: \`inputs\` tokens + \`max_new_tokens\` must be <= ${n.limit}. Given: ${n.prompt} \`inputs\` tokens and ${n.completion} \`max_new_tokens\``,
  (n) => `Unable to submit request because the input token count is ${n.prompt} but model only supports up to ${n.limit}.`,
];

/** The same message in the envelopes providers and proxies use. */
const ENVELOPES: ((m: string) => { status: number; body: string })[] = [
  (m) => ({ status: 400, body: JSON.stringify({ error: { message: m, type: 'invalid_request_error', code: null } }) }),
  (m) => ({ status: 400, body: JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: m } }) }),
  (m) => ({ status: 400, body: JSON.stringify({ object: 'error', message: m, type: 'BadRequestError', code: 400 }) }),
  (m) => ({ status: 400, body: JSON.stringify({ message: m }) }),
  (m) => ({ status: 400, body: JSON.stringify({ error: m }) }),
  (m) => ({ status: 422, body: JSON.stringify({ code: 422, message: m }) }),
  (m) => ({ status: 400, body: JSON.stringify([{ error: { code: 400, message: m, status: 'INVALID_ARGUMENT' } }]) }),
  (m) => ({ status: 400, body: JSON.stringify(JSON.stringify({ error: { message: m } })) }),
  (m) => ({ status: 500, body: m }),
  (m) => ({ status: 502, body: `<html><body><h1>Bad Gateway</h1><p>${m}</p></body></html>` }),
  (m) => ({ status: 400, body: `event: error\ndata: ${JSON.stringify({ type: 'error', error: { message: m } })}\n\n` }),
  (m) => ({ status: 200, body: JSON.stringify({ error: { message: m, code: 502 } }) }),
];

/** Wrap a body the way proxies do: as a string inside a message (up to 3 levels), or in objects. */
function wrap(body: string, asString: number, inObjects: number): string {
  let out = body;
  for (let i = 0; i < asString; i++) out = JSON.stringify({ error: { message: `ProxyError: upstream said ${out}`, code: 502 } });
  for (let i = 0; i < inObjects; i++) out = JSON.stringify({ error: { details: JSON.parse(out) as unknown } });
  return out;
}

const wordingIndex = fc.nat({ max: OVERFLOW_WORDINGS.length - 1 });
const envelopeIndex = fc.nat({ max: ENVELOPES.length - 1 });

describe.each(MODES)('an overflow stays an overflow (%s)', (_mode, classifier) => {
  it('whatever its numbers and envelope', () => {
    fc.assert(
      fc.property(overflowNumbers, wordingIndex, envelopeIndex, (n, w, e) => {
        const { status, body } = ENVELOPES[e](OVERFLOW_WORDINGS[w](n));
        const verdict = classifier.classifyResponse({ status, body });
        expect(verdict, `${status} ${body}`).toMatchObject({ overlong: true, reason: 'context_length' });
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it('whatever its wrapping depth', () => {
    fc.assert(
      fc.property(overflowNumbers, wordingIndex, fc.nat({ max: 2 }), fc.nat({ max: 6 }), (n, w, asString, inObjects) => {
        const inner = JSON.stringify({ error: { message: OVERFLOW_WORDINGS[w](n) } });
        const body = wrap(inner, asString, inObjects);
        expect(classifier.classifyResponse({ status: 400, body })).toMatchObject({ overlong: true });
        expect(classifier.classifyStreamEvent(body)).toMatchObject({ overlong: true });
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it('and the window it states is the one the limits report', () => {
    fc.assert(
      fc.property(overflowNumbers, wordingIndex, (n, w) => {
        const verdict = classifier.classifyResponse({ status: 400, body: JSON.stringify({ message: OVERFLOW_WORDINGS[w](n) }) });
        expect(verdict.overlong && verdict.limits.limitTokens).toBe(n.limit);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});

const VETOED: [string, string][] = [
  ['rate_limit', 'Rate limit reached for gpt-4o in organization org-1 on requests per min (RPM): Limit 3, Used 3.'],
  ['rate_limit', 'Number of request tokens has exceeded your per-minute rate limit; please wait.'],
  ['quota', 'You exceeded your current quota, please check your plan and billing details.'],
  ['billing', 'The long context beta is not yet available for this subscription.'],
  ['billing', 'This request requires more credits, or fewer max_tokens. You requested up to 65536 tokens, but can only afford 10114.'],
  ['auth', 'Incorrect API key provided: sk-****. You can find your API key at https://platform.openai.com/account/api-keys.'],
  ['content_filter', "The response was filtered due to the prompt triggering Azure OpenAI's content management policy."],
  ['model_not_found', 'The model `gpt-5-128k` does not exist or you do not have access to it.'],
  ['schema', 'Extra inputs are not permitted'],
  ['overloaded', 'Overloaded'],
];
const OVERFLOW_WORDS = [
  'too many tokens',
  'prompt is too long',
  'context length exceeded',
  'your input exceeds the maximum context length of 8192 tokens',
  "This model's maximum context length is 4096 tokens. However, your messages resulted in 9000 tokens.",
  'input length and `max_tokens` exceed context limit: 180000 + 64000 > 200000',
];
const OUTPUT_CAPS = [
  'max_tokens is too large: 8192. This model supports at most 4096 completion tokens, whereas you provided 8192.',
  '`max_completion_tokens` must be less than or equal to `16384`',
  'max_tokens: 21333 > 4096, which is the maximum allowed number of output tokens for claude-3-opus-20240229',
];
const WEAK_WORDS = ['too many tokens', 'token limit exceeded', 'exceeds the limit'];

describe.each(MODES)('a vetoed error stays vetoed (%s)', (_mode, classifier) => {
  const placed = (core: string, word: string, where: number) =>
    where === 0 ? `${word}, ${core}` : where === 1 ? `${core} (${word})` : `${word}: ${core} ${word}`;

  it('when overflow words are added around it', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...VETOED),
        fc.constantFrom(...OVERFLOW_WORDS),
        fc.nat({ max: 2 }),
        envelopeIndex,
        ([rule, core], word, where, e) => {
          const { status, body } = ENVELOPES[e](placed(core, word, where));
          expect(classifier.classifyResponse({ status, body })).toEqual({ overlong: false, rule });
        },
      ),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it('an output cap stays one when vague overflow words are added', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...OUTPUT_CAPS),
        fc.constantFrom(...WEAK_WORDS),
        fc.nat({ max: 2 }),
        envelopeIndex,
        (core, word, where, e) => {
          const { status, body } = ENVELOPES[e](placed(core, word, where));
          expect(classifier.classifyResponse({ status, body }), body).toEqual({ overlong: false, rule: 'output_token_cap' });
        },
      ),
      { seed: SEED, numRuns: RUNS },
    );
  });
});
