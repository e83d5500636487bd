import { describe, expect, it } from 'vitest';
import { classifyWith, loadFixtures, rulesWithout } from '../../scripts/lofo.js';
import { classifyResponse, classifyStreamEvent, createClassifier, type StatedLimits, type Verdict } from '../../src/overlong/classify.js';
import { gatherEvidence } from '../../src/overlong/evidence.js';
import { limitReader, NUMBER_GROUPS } from '../../src/overlong/numbers.js';
import { NOT_OVERLONG_PHRASES, OVERLONG_CODES, OVERLONG_PHRASES, STATEMENTS } from '../../src/overlong/rules.js';
import { VETO_CODES } from '../helpers/veto-codes.js';

// rules.ts promises each specific rule a fixture or a test case. These tests hold it to that:
// every rule still matches the wording it was written from, decides it (unless an earlier
// phrase in the same text always does), and goes quiet when its family is switched off.
const EXTRA_WORDINGS = [
  // GLM-compatible endpoints; no full body was found (see test/fixtures/README.md)
  'The number of input tokens (140000) has exceeded max_prompt_tokens (131072)',
  // express/raw-body and Hono-style servers
  'Request body is too large',
  // Anthropic's edge, older wording
  'Request exceeds the maximum size',
  // Groq
  '`max_tokens` must be less than or equal to `8192`, the maximum value for `max_tokens` is less than the `context_window` for this model',
];
const texts = [...loadFixtures().map((f) => gatherEvidence(f.body, f.status >= 400).text), ...EXTRA_WORDINGS];
/** Phrases whose every wording also holds an earlier phrase, which decides first. */
const SHADOWED = new Set([
  'reduce_your_prompt', // always after "maximum context length is N tokens"
  'requested_token_count_exceeds', // SGLang states the completion-fills-window numbers too
  'litellm_context_window_exceeded', // LiteLLM wraps a provider text another rule reads
]);
const asBody = (text: string) => JSON.stringify({ error: { message: text } });
const generalOnly = createClassifier([]);

describe('every specific phrase', () => {
  it.each(OVERLONG_PHRASES.map((p) => [p.rule, p] as const))('%s matches its wording and decides it', (_rule, p) => {
    const wordings = texts.filter((t) => p.pattern.test(t));
    expect(wordings.length).toBeGreaterThan(0);
    const decided = wordings.filter((t) => classifyResponse({ status: 400, body: asBody(t) }).rule === p.rule);
    if (!SHADOWED.has(p.rule)) {
      expect(decided.length).toBeGreaterThan(0);
      const off = createClassifier(rulesWithout(p.family)).classifyResponse({ status: 400, body: asBody(decided[0]) });
      expect(off.rule).not.toBe(p.rule);
      const verdict = classifyResponse({ status: 400, body: asBody(decided[0]) });
      if (verdict.overlong) expect(verdict.reason).toBe(p.reason);
    }
  });

  it.each(NOT_OVERLONG_PHRASES.map((p, i) => [`${p.rule} #${i}`, p] as const))('%s matches its wording and vetoes it', (_name, p) => {
    const wordings = texts.filter((t) => p.pattern.test(t));
    expect(wordings.length).toBeGreaterThan(0);
    expect(wordings.some((t) => classifyResponse({ status: 400, body: asBody(t) }).rule === p.rule)).toBe(true);
    expect(wordings.some((t) => generalOnly.classifyResponse({ status: 400, body: asBody(t) }).rule === p.rule)).toBe(
      p.rule === 'output_token_cap' || p.rule === 'attachment_limit',
    );
  });
});

describe('every specific code', () => {
  it.each(OVERLONG_CODES.map((rule) => [rule.code, rule] as const))('%s decides, and goes quiet with its family off', (code, rule) => {
    const body = JSON.stringify({ error: { code, message: 'bad request' } });
    expect(classifyResponse({ status: 400, body })).toMatchObject({ overlong: true, rule: code, reason: rule.reason });
    expect(createClassifier(rulesWithout(rule.family)).classifyResponse({ status: 400, body }).rule).not.toBe(code);
  });
});

// Every pattern with named groups: the phrases' own numbers and the numbers-only sentences.
const STATING = STATEMENTS.filter((p) => /\(\?<[A-Za-z]/.test(p.pattern.source));

describe('every number statement', () => {
  it.each(STATING.map((p, i) => [`#${i} ${p.family}`, p] as const))('%s reads numbers from its wording', (_name, p) => {
    const wordings = texts.filter((t) => Object.values(p.pattern.exec(t)?.groups ?? {}).some((d) => d !== undefined));
    expect(wordings.length).toBeGreaterThan(0);
    const groups = p.pattern.exec(wordings[0])?.groups ?? {};
    // a misspelt group name would read nothing, silently
    for (const name of Object.keys(groups)) expect(NUMBER_GROUPS, name).toContain(name);
    const limits = limitReader(STATEMENTS.filter((r) => r.family === p.family))(wordings[0], {});
    for (const [field, digits] of Object.entries(groups)) {
      if (digits !== undefined) expect(limits[field as keyof typeof limits], field).toBe(Number(digits));
    }
    expect(limitReader([])(wordings[0], {})).toEqual({});
  });
});

describe('what the gateway reports for each real error, written out literally', () => {
  // What the gateway reports for each real error (overlong or not, the rule it logs, the numbers
  // it read). The tables above walk the rule tables themselves, so a wrong family tag or rule name
  // there is also what they check against; here every expectation is a literal, and each family
  // is switched off by its name as the LOFO script does.

  const fixtures = new Map(loadFixtures().map((f) => [f.id, f]));
  const C = 'context_length';
  const B = 'body_too_large';

  function classifyFixture(id: string, disabled: string[] = []): Verdict {
    const f = fixtures.get(id);
    if (f === undefined) throw new Error(`no fixture ${id}`);
    return classifyWith(f, createClassifier(rulesWithout(...disabled)));
  }

  /** A message as OpenAI-compatible servers wrap it (no code, so the wording alone decides). */
  function message(text: string, status = 400, disabled: string[] = []): Verdict {
    return createClassifier(rulesWithout(...disabled)).classifyResponse({ status, body: JSON.stringify({ error: { message: text } }) });
  }

  const overlong = (rule: string, reason: string, limits: StatedLimits): Verdict => ({ overlong: true, rule, reason, limits }) as Verdict;
  const passed = (rule: string): Verdict => ({ overlong: false, rule });

  /**
   * Limits the general reading (quantities.ts) takes from numbers that are not token counts: the
   * 10485760 of "a string with maximum length 10485760" read as limitTokens, and the 196 of
   * "raw-body/index.js:196:17" in a stack trace read as bodyBytes. Not checked here (not this
   * file's rules; reported in issue 15).
   */
  const LIMITS_UNCHECKED = 'limits unchecked';

  /** [fixture id, rule, reason, limits] for an overflow; [fixture id, rule] for anything else. */
  type Row = [string, string, 'context' | 'body', StatedLimits | typeof LIMITS_UNCHECKED] | [string, string];

  // prettier-ignore
  const EVERY_FIXTURE: Row[] = [
    ['openai-ctx-messages-compact', 'context_length_exceeded', 'context', { limitTokens: 4097, promptTokens: 4294 }],
    ['openai-ctx-messages-plus-completion-pretty', 'context_length_exceeded', 'context', { limitTokens: 4097, promptTokens: 3120, completionTokens: 1000, completionCounted: true }],
    ['openai-legacy-completions-wording', 'maximum_context_length', 'context', { limitTokens: 8192, promptTokens: 8977, completionTokens: 0, completionCounted: true }],
    ['openai-string-above-max-length-content', 'string_above_max_length', 'context', LIMITS_UNCHECKED],
    ['openai-responses-context-window-in-stream', 'context_length_exceeded', 'context', {}],
    ['openai-embeddings-max-tokens-per-request', 'max_tokens_per_request', 'context', { promptTokens: 319487, limitTokens: 300000 }],
    ['anthropic-prompt-too-long', 'prompt_too_long', 'context', { promptTokens: 200251, limitTokens: 200000 }],
    ['anthropic-input-plus-max-tokens', 'input_and_max_tokens_exceed_context', 'context', { promptTokens: 143653, completionTokens: 64000, limitTokens: 200000, completionCounted: true }],
    ['anthropic-413-request-too-large', 'request_too_large', 'body', {}],
    ['gemini-native-input-token-count', 'input_token_count_exceeds', 'context', { promptTokens: 3475108, limitTokens: 1048576 }],
    ['gemini-code-assist-array-body', 'input_token_count_exceeds', 'context', { promptTokens: 1200293, limitTokens: 1048576 }],
    ['gemini-413-max-request-body-size', 'request_body_size_exceeded', 'body', { limitBytes: 1048576, bodyBytes: 1056562 }],
    ['bedrock-input-too-long', 'input_too_long_for_model', 'context', {}],
    ['bedrock-stream-validation-exception', 'input_too_long_for_model', 'context', {}],
    ['deepseek-ctx', 'maximum_context_length', 'context', { limitTokens: 131072, promptTokens: 122942, completionTokens: 8192, completionCounted: true }],
    ['groq-ctx', 'context_length_exceeded', 'context', {}],
    ['mistral-ctx', 'too_large_for_model_context', 'context', { promptTokens: 159202, limitTokens: 131072 }],
    ['openrouter-endpoint-ctx-input', 'maximum_context_length', 'context', { limitTokens: 32768, promptTokens: 42832 }],
    ['openrouter-200-upstream-ctx-as-502', 'maximum_context_length', 'context', { limitTokens: 16000, promptTokens: 13069, completionTokens: 4096, completionCounted: true }],
    ['cohere-too-many-tokens', 'cohere_total_tokens', 'context', { limitTokens: 2048, completionCounted: true }],
    ['together-tgi-validation', 'tgi_inputs_plus_max_new_tokens', 'context', { limitTokens: 2048, promptTokens: 2019, completionTokens: 30, completionCounted: true }],
    ['dashscope-range-of-input-length', 'input_length_range', 'context', { limitTokens: 204800 }],
    ['vllm-ctx-new-format', 'maximum_context_length', 'context', { limitTokens: 4096, completionTokens: 1, promptTokens: 4096, completionCounted: true }],
    ['vllm-ctx-old-format', 'maximum_context_length', 'context', { limitTokens: 16384, promptTokens: 9591, completionTokens: 10000, completionCounted: true }],
    ['vllm-old-negative-max-tokens', 'negative_max_tokens', 'context', {}],
    ['fastchat-context-overflow-40303', 'maximum_context_length', 'context', { limitTokens: 2048, promptTokens: 3503 }],
    ['tgi-total-tokens-422', 'tgi_inputs_plus_max_new_tokens', 'context', { limitTokens: 65537, promptTokens: 79993, completionTokens: 1024, completionCounted: true }],
    ['tgi-chat-stream-in-band-error', 'tgi_inputs_plus_max_new_tokens', 'context', { limitTokens: 8192, promptTokens: 6204, completionTokens: 2047, completionCounted: true }],
    ['llamacpp-exceed-context-size-v1', 'exceed_context_size_error', 'context', { promptTokens: 14429, limitTokens: 8192 }],
    ['llamacpp-exceed-context-size-v2', 'exceed_context_size_error', 'context', { promptTokens: 25837, limitTokens: 25088 }],
    ['lmstudio-n-keep-gt-n-ctx', 'tokens_to_keep_exceed_context', 'context', { promptTokens: 13055, limitTokens: 4096 }],
    ['lmstudio-trying-to-keep-in-stream', 'keep_first_tokens_overflow', 'context', { promptTokens: 14538, limitTokens: 2048 }],
    ['ollama-native-prompt-longer-than-context', 'prompt_longer_than_context', 'context', {}],
    ['ollama-embed-input-exceeds', 'input_length_exceeds_context', 'context', {}],
    ['nginx-413-with-version-and-padding', 'request_entity_too_large', 'body', {}],
    ['nginx-413-old-bgcolor-behind-gclb', 'request_entity_too_large', 'body', {}],
    ['openresty-413', 'request_entity_too_large', 'body', {}],
    ['envoy-413-payload-too-large', 'payload_too_large', 'body', {}],
    ['fastify-413-body-too-large', 'fst_err_ctp_body_too_large', 'body', {}],
    ['azure-content-filter-prompt', 'content_filter'],
    ['openai-content-policy-violation-images', 'content_filter'],
    ['openai-429-request-too-large-tpm', 'status_429'],
    ['groq-413-tpm-request-too-large', 'rate_limit'],
    ['openai-invalid-api-key', 'auth'],
    ['openai-invalid-value-echoes-forged-overflow', 'schema'],
    ['openai-max-tokens-too-large', 'output_token_cap'],
    ['anthropic-max-tokens-over-model-cap', 'output_token_cap'],
    ['litellm-proxy-rewrap-anthropic-max-tokens', 'output_token_cap'],
    ['vllm-max-tokens-too-large-mentions-context-length', 'completion_fills_window'],
    ['vllm-max-tokens-equals-window-input-text', 'completion_fills_window'],
    ['openrouter-output-reservation-equals-window', 'completion_fills_window'],
    ['anthropic-overloaded-529', 'overloaded'],
    ['anthropic-overloaded-in-stream', 'overloaded'],
    ['openai-500-server-error', 'no_signal'],
    ['tool-name-string-above-max-length', 'schema_string_too_long'],
    ['anthropic-image-exceeds-5mb', 'attachment_limit'],
    ['anthropic-many-image-dimension', 'attachment_limit'],
    // Bound thinking refused (preserved thinking): before anything else is read.
    ['anthropic-thinking-bound-elsewhere', 'thinking_bound_elsewhere'],
    ['anthropic-thinking-bound-elsewhere-system', 'thinking_bound_elsewhere'],
    ['bedrock-thinking-bound-elsewhere', 'thinking_bound_elsewhere'],
    ['anthropic-thinking-signature-invalid', 'thinking_bound_elsewhere'],
    ['anthropic-block-binding-without-beta', 'block_binding_not_permitted'],
    ['anthropic-thinking-must-lead', 'thinking_must_lead'],
    ['gemini-400-invalid-argument-generic', 'no_signal'],
    ['openai-200-finish-reason-length', 'no_error_object'],
    ['xai-maximum-prompt-length', 'maximum_prompt_length', 'context', { limitTokens: 131072, promptTokens: 136973 }],
    ['xai-input-too-large-budget', 'input_too_large', 'context', { promptTokens: 1149677, limitTokens: 975424 }],
    ['sglang-input-longer-than-context', 'input_longer_than_context', 'context', { promptTokens: 61709, limitTokens: 40960 }],
    ['sglang-requested-token-count-completion-fills-window', 'completion_fills_window'],
    ['openai-gpt5-input-tokens-configured-limit', 'input_tokens_exceed_configured_limit', 'context', { promptTokens: 289650, limitTokens: 272000 }],
    ['azure-input-plus-completion-pretty', 'context_length_exceeded', 'context', { limitTokens: 32768, promptTokens: 9969, completionTokens: 26000, completionCounted: true }],
    ['azure-completion-alone-exceeds-window', 'completion_fills_window'],
    ['vertex-unable-to-submit-input-token-count', 'input_token_count_over_model_limit', 'context', { promptTokens: 1251952, limitTokens: 1048576 }],
    ['vertex-input-token-count-without-count', 'input_token_count_exceeds', 'context', { limitTokens: 1048576 }],
    ['openrouter-raw-bedrock-input-plus-max-tokens', 'input_and_max_tokens_exceed_context', 'context', { promptTokens: 149674, completionTokens: 64000, limitTokens: 204658, completionCounted: true }],
    ['moonshot-exceeded-model-token-limit', 'exceeded_model_token_limit', 'context', { limitTokens: 262144 }],
    ['minimax-context-window-exceeds-limit', 'context_window_exceeds_limit', 'context', {}],
    ['cerebras-current-length-over-limit', 'current_length_over_limit', 'context', { limitTokens: 40000 }],
    ['together-inputs-plus-max-new-tokens-no-room', 'completion_fills_window'],
    ['fireworks-prompt-too-long', 'prompt_too_long', 'context', { promptTokens: 262377, limitTokens: 262143 }],
    ['groq-max-completion-tokens-mentions-context-window', 'output_token_cap'],
    ['litellm-context-window-class-wrapping-tool-description', 'schema_string_too_long'],
    ['litellm-context-window-exceeded-openai', 'maximum_context_length', 'context', { limitTokens: 128000, promptTokens: 172152 }],
    ['bedrock-converse-prompt-too-long', 'prompt_too_long', 'context', { promptTokens: 227255, limitTokens: 200000 }],
    ['llamacpp-500-exceed-context-size', 'exceed_context_size_error', 'context', { promptTokens: 1407, limitTokens: 256 }],
    ['llamacpp-500-context-size-exceeded-server-error', 'context_size_exceeded', 'context', {}],
    ['aws-lambda-413-request-too-long', 'request_too_long', 'body', {}],
    ['aws-apigateway-413-content-length-exceeded', 'content_length_exceeded', 'body', { limitBytes: 10485760 }],
    ['cloudflare-413-html', 'request_entity_too_large', 'body', {}],
    ['vercel-413-function-payload-too-large', 'request_entity_too_large', 'body', {}],
    ['vercel-413-json', 'request_entity_too_large', 'body', {}],
    ['express-413-html-stack', 'request_entity_too_large', 'body', LIMITS_UNCHECKED],
    ['zhipu-1261-prompt-exceeds-max-length', 'general_input_over_limit', 'context', {}],
    ['zhipu-anthropic-compat-1210-input-tokens-exceeds', 'general_input_over_limit', 'context', { promptTokens: 182387, limitTokens: 202750 }],
    ['volcengine-ark-input-length-exceeds-maximum', 'general_input_over_limit', 'context', { promptTokens: 203743, limitTokens: 202752 }],
    ['mistral-embed-too-many-tokens-in-batch', 'general_stated_numbers', 'context', { limitTokens: 16384 }],
    ['hf-inference-inputs-plus-max-new-tokens', 'tgi_inputs_plus_max_new_tokens', 'context', { limitTokens: 4096, promptTokens: 8740, completionTokens: 500, completionCounted: true }],
    ['cohere-size-limit-exceeded-by', 'general_input_over_limit', 'context', {}],
    ['vllm-v1-decoder-prompt-longer-than-max-model-len', 'general_input_over_limit', 'context', { promptTokens: 17772, limitTokens: 16384 }],
    ['vllm-prompt-too-long-to-fit-multimodal', 'general_input_over_limit', 'context', { limitTokens: 4096 }],
    ['ds4-context-exceeded-fields', 'general_input_over_limit', 'context', { promptTokens: 40321, limitTokens: 32768 }],
    ['openai-responses-response-failed-in-stream', 'context_length_exceeded', 'context', {}],
    ['openai-responses-error-event-top-level', 'context_length_exceeded', 'context', {}],
    ['openai-responses-400-input-exceeds-context-window', 'context_length_exceeded', 'context', {}],
    ['anthropic-prompt-too-long-in-stream', 'prompt_too_long', 'context', { promptTokens: 210266, limitTokens: 200000 }],
    ['litellm-anthropic-bytes-repr-input-plus-max-tokens', 'input_and_max_tokens_exceed_context', 'context', { promptTokens: 174167, completionTokens: 64000, limitTokens: 200000, completionCounted: true }],
    ['bedrock-validation-model-returned-prompt-too-long', 'prompt_too_long', 'context', { promptTokens: 200049, limitTokens: 200000 }],
    ['rkllm-prompt-tokens-but-window', 'general_stated_numbers', 'context', { promptTokens: 11543, limitTokens: 4096 }],
    ['kong-413-request-size-limit-exceeded', 'status_413', 'body', {}],
    ['anthropic-long-context-beta-unavailable', 'billing'],
    ['openrouter-402-more-credits-or-fewer-max-tokens', 'billing'],
    ['openrouter-key-prompt-tokens-limit-exceeded', 'billing'],
    ['mistral-422-extra-forbidden-max-completion-tokens', 'schema'],
    ['cloudflare-aig-max-completion-tokens-too-large', 'output_token_cap'],
    ['anthropic-429-input-tokens-per-minute', 'status_429'],
    ['zhipu-1214-max-tokens-invalid', 'no_signal'],
    ['ollama-500-context-deadline-exceeded', 'timeout'],
    ['tgi-inputs-must-have-less-than', 'general_stated_numbers', 'context', { limitTokens: 2048 }],
    ['lmstudio-input-length-exceeds-context-length', 'general_input_over_limit', 'context', { promptTokens: 6491, limitTokens: 1500 }],
    ['llama-cpp-python-requested-tokens-exceed-context-window', 'general_stated_numbers', 'context', { limitTokens: 2048 }],
    ['deepseek-tool-name-string-too-long-param-null', 'schema_field_size'],
    ['openai-tools-array-above-max-length', 'schema_field_size'],
    ['copilot-tools-array-too-long-invalid-request-body', 'schema_field_size'],
    ['volcengine-ark-max-completion-tokens-above-maximum', 'completion_value_cap'],
    ['dashscope-tool-name-cannot-exceed-64', 'field_size'],
    ['kiro-tool-names-exceed-64-characters', 'field_size'],
    ['gemini-function-declaration-name-maximum-length', 'schema_field_size'],
    ['vllm-max-tokens-at-least-1-got-0', 'negative_max_tokens', 'context', {}],
    ['anthropic-stop-reason-model-context-window-exceeded', 'window_stop_reason', 'context', {}],
  ];

  describe('every fixture: the verdict and rule the gateway logs', () => {
    it('covers every fixture once', () => {
      expect(EVERY_FIXTURE.map((r) => r[0]).sort()).toEqual([...fixtures.keys()].sort());
    });

    it.each(EVERY_FIXTURE.map((row) => [row[0], row] as const))('%s', (id, row) => {
      const verdict = classifyFixture(id);
      if (row.length === 2) return expect(verdict).toEqual(passed(row[1]));
      const [, rule, reason, limits] = row;
      if (limits !== LIMITS_UNCHECKED) return expect(verdict).toEqual(overlong(rule, reason === 'context' ? C : B, limits));
      expect(verdict).toMatchObject({ overlong: true, rule, reason: reason === 'context' ? C : B });
    });
  });

  // Each specific phrase on its own wording, sent without the error code that would decide first
  // (proxies and older servers drop it), and the same wording with that family switched off: the
  // general layer then decides it (under another rule name), or nothing does.
  // [rule, family, status, message, reason, limits, rule with the family off]
  // prettier-ignore
  const PHRASES: [string, string, number, string, 'context' | 'body', StatedLimits, string][] = [
    ['maximum_context_length', 'openai', 400, "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.", 'context', { limitTokens: 4097, promptTokens: 4294 }, 'general_stated_numbers'],
    ['input_tokens_exceed_configured_limit', 'openai', 400, 'Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 289650 tokens. Please reduce the length of the messages.', 'context', { promptTokens: 289650, limitTokens: 272000 }, 'general_input_over_limit'],
    ['input_exceeds_context_window', 'openai', 400, 'Your input exceeds the context window of this model. Please adjust your input and try again.', 'context', {}, 'general_input_over_limit'],
    ['tokens_per_request', 'openai', 400, 'Requested 319487 tokens, max 300000 tokens per request', 'context', { promptTokens: 319487, limitTokens: 300000 }, 'general_stated_numbers'],
    ['reduce_length_of_messages', 'openai', 400, 'Please reduce the length of the messages or completion.', 'context', {}, 'general_shorten_advice'],
    ['prompt_too_long', 'anthropic', 400, 'prompt is too long: 200251 tokens > 200000 maximum', 'context', { promptTokens: 200251, limitTokens: 200000 }, 'general_input_over_limit'],
    ['input_and_max_tokens_exceed_context', 'anthropic', 400, 'input length and `max_tokens` exceed context limit: 143653 + 64000 > 200000, decrease input length or `max_tokens` and try again', 'context', { promptTokens: 143653, completionTokens: 64000, limitTokens: 200000, completionCounted: true }, 'general_input_over_limit'],
    ['request_exceeds_maximum_size', 'anthropic', 413, 'Request exceeds the maximum size', 'body', {}, 'status_413'],
    ['input_too_long_for_model', 'bedrock', 400, 'Input is too long for requested model.', 'context', {}, 'general_input_over_limit'],
    ['input_token_count_exceeds', 'gemini', 400, 'The input token count (3475108) exceeds the maximum number of tokens allowed (1048576).', 'context', { promptTokens: 3475108, limitTokens: 1048576 }, 'general_input_over_limit'],
    ['input_token_count_exceeds', 'gemini', 400, 'The input token count exceeds the maximum number of tokens allowed 1048576.', 'context', { limitTokens: 1048576 }, 'general_input_over_limit'],
    ['input_token_count_over_model_limit', 'gemini', 400, 'Unable to submit request because the input token count is 1251952 but model only supports up to 1048576. Reduce the input token count and try again.', 'context', { promptTokens: 1251952, limitTokens: 1048576 }, 'general_stated_numbers'],
    ['too_large_for_model_context', 'mistral', 400, 'Prompt contains 159202 tokens and 0 draft tokens, too large for model with 131072 maximum context length', 'context', { promptTokens: 159202, limitTokens: 131072 }, 'general_input_over_limit'],
    ['tgi_inputs_plus_max_new_tokens', 'tgi', 422, 'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 2019 `inputs` tokens and 30 `max_new_tokens`', 'context', { limitTokens: 2048, promptTokens: 2019, completionTokens: 30, completionCounted: true }, 'general_input_over_limit'],
    ['cohere_total_tokens', 'cohere', 400, 'too many tokens: total number of tokens (prompt and prediction) cannot exceed 2048 - received 6354. Try using a shorter prompt or a smaller max_tokens value.', 'context', { limitTokens: 2048, completionCounted: true }, 'general_input_over_limit'],
    ['input_length_range', 'dashscope', 400, '<400> InternalError.Algo.InvalidParameter: Range of input length should be [1, 204800]', 'context', { limitTokens: 204800 }, 'general_input_over_limit'],
    ['exceeds_available_context_size', 'llamacpp', 400, 'the request exceeds the available context size. try increasing the context size or enable context shift', 'context', {}, 'general_input_over_limit'],
    ['exceeds_available_context_size', 'llamacpp', 400, 'request (25837 tokens) exceeds the available context size (25088 tokens), try increasing it', 'context', { promptTokens: 25837, limitTokens: 25088 }, 'general_input_over_limit'],
    ['context_size_exceeded', 'llamacpp', 500, 'Context size has been exceeded.', 'context', {}, 'general_input_over_limit'],
    ['tokens_to_keep_exceed_context', 'lmstudio', 400, 'The number of tokens to keep from the initial prompt is greater than the context length (n_keep: 13055>= n_ctx: 4096). Try to load the model with a larger context length, or provide a shorter input.', 'context', { promptTokens: 13055, limitTokens: 4096 }, 'general_input_over_limit'],
    ['keep_first_tokens_overflow', 'lmstudio', 400, 'Trying to keep the first 14538 tokens when context the overflows. However, the model is loaded with context length of only 2048 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input', 'context', { promptTokens: 14538, limitTokens: 2048 }, 'general_input_over_limit'],
    ['prompt_longer_than_context', 'ollama', 400, 'the prompt is longer than the context length currently available to the model; shorten the prompt, adjust the context length in settings, or use a model with a longer context length', 'context', {}, 'general_input_over_limit'],
    ['input_length_exceeds_context', 'ollama', 400, 'the input length exceeds the context length', 'context', {}, 'general_input_over_limit'],
    ['maximum_prompt_length', 'xai', 400, "This model's maximum prompt length is 131072 but the request contains 136973 tokens.", 'context', { limitTokens: 131072, promptTokens: 136973 }, 'general_stated_numbers'],
    ['input_too_large', 'xai', 400, 'Failed to start sampling: [input_too_large] Current message (1149677 tokens) exceeds budget (975424 tokens)', 'context', { promptTokens: 1149677, limitTokens: 975424 }, 'general_input_over_limit'],
    ['input_longer_than_context', 'sglang', 400, "The input (61709 tokens) is longer than the model's context length (40960 tokens).", 'context', { promptTokens: 61709, limitTokens: 40960 }, 'general_input_over_limit'],
    // SGLang's template (see the fixture) with room left for the prompt: then it is an overflow
    ['requested_token_count_exceeds', 'sglang', 400, "Requested token count exceeds the model's maximum context length of 64000 tokens. You requested a total of 71897 tokens: 67897 tokens from the input messages and 4000 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.", 'context', { limitTokens: 64000, promptTokens: 67897, completionTokens: 4000, completionCounted: true }, 'general_stated_numbers'],
    ['exceeded_model_token_limit', 'moonshot', 400, 'Invalid request: Your request exceeded model token limit: 262144 (requested: 269030)', 'context', { limitTokens: 262144 }, 'general_input_over_limit'],
    ['context_window_exceeds_limit', 'minimax', 400, 'invalid params, context window exceeds limit (2013)', 'context', {}, 'general_input_over_limit'],
    ['current_length_over_limit', 'cerebras', 400, 'Please reduce the length of the messages or completion. Current length is 42328 while limit is 40000', 'context', { limitTokens: 40000 }, 'reduce_length_of_messages'],
    ['input_tokens_exceed_max_prompt_tokens', 'glm', 400, 'The number of input tokens (140000) has exceeded max_prompt_tokens (131072)', 'context', { promptTokens: 140000, limitTokens: 131072 }, 'general_input_over_limit'],
    ['negative_max_tokens', 'vllm', 400, 'max_tokens must be at least 1, got -186.', 'context', {}, 'general_no_room_for_output'],
    ['request_body_size_exceeded', 'http', 413, 'Maximum request body size 1048576 exceeded, actual body size 1056562', 'body', { limitBytes: 1048576, bodyBytes: 1056562 }, 'status_413'],
    ['content_length_exceeded', 'http', 413, 'HTTP content length exceeded 10485760 bytes.', 'body', { limitBytes: 10485760 }, 'status_413'],
    ['request_entity_too_large', 'http', 413, 'Request Entity Too Large', 'body', {}, 'status_413'],
    ['payload_too_large', 'http', 413, 'Payload Too Large', 'body', {}, 'status_413'],
    ['request_body_too_large', 'http', 413, 'Request body is too large', 'body', {}, 'status_413'],
    ['request_too_long', 'http', 413, 'Request Too Long', 'body', {}, 'status_413'],
  ];

  describe('each specific phrase on its own wording', () => {
    it.each(PHRASES.map((row) => [row[0], row[3].slice(0, 48), row] as const))('%s: %s', (_rule, _text, row) => {
      const [rule, family, status, text, reason, limits, off] = row;
      expect(message(text, status)).toEqual(overlong(rule, reason === 'context' ? C : B, limits));
      expect(message(text, status, [family]).rule).toBe(off);
    });

    it('reads a body-size phrase as body_too_large under any status', () => {
      // Anthropic's edge wording relayed without its code or its 413 (see classify.test.ts)
      expect(message('Request exceeds the maximum size')).toEqual(overlong('request_exceeds_maximum_size', B, {}));
    });

    it('names the LiteLLM class when the wrapped provider text is not read', () => {
      expect(classifyFixture('litellm-context-window-exceeded-openai', ['openai'])).toMatchObject({
        overlong: true,
        reason: C,
        rule: 'litellm_context_window_exceeded',
      });
      expect(classifyFixture('litellm-context-window-exceeded-openai', ['openai', 'litellm'])).toMatchObject({
        overlong: true,
        rule: 'general_stated_numbers',
      });
    });
  });

  // Codes decide before any phrase; with the code's family off, the phrase or the general layer
  // decides instead. [fixture, family switched off, rule then]
  describe('each specific code, and its family switched off', () => {
    it.each([
      ['groq-ctx', 'context_length_exceeded', 'openai', 'general_input_over_limit'],
      // no code: the legacy wording's two openai phrases both go quiet, and the numbers decide
      ['openai-legacy-completions-wording', 'maximum_context_length', 'openai', 'general_stated_numbers'],
      ['openai-embeddings-max-tokens-per-request', 'max_tokens_per_request', 'openai', 'general_stated_numbers'],
      ['llamacpp-exceed-context-size-v1', 'exceed_context_size_error', 'llamacpp', 'general_input_over_limit'],
      ['anthropic-413-request-too-large', 'request_too_large', 'anthropic', 'status_413'],
      ['fastify-413-body-too-large', 'fst_err_ctp_body_too_large', 'http', 'status_413'],
    ])('%s: %s; without %s: %s', (id, rule, family, off) => {
      expect(classifyFixture(id).rule).toBe(rule);
      expect(classifyFixture(id, [family]).rule).toBe(off);
    });
  });

  describe('output caps are not overflows', () => {
    it("Groq's max_tokens cap", () => {
      // the max_completion_tokens form is fixture groq-max-completion-tokens-mentions-context-window
      const text =
        '`max_tokens` must be less than or equal to `8192`, the maximum value for `max_tokens` is less than the `context_window` for this model';
      expect(message(text)).toEqual(passed('output_token_cap'));
    });
  });

  describe('codes that settle "not overlong" whatever the message says', () => {
    it.each(VETO_CODES)('%s, in a body with no text, is %s', (code, rule) => {
      expect(classifyResponse({ status: 400, body: JSON.stringify({ error: { type: code } }) })).toEqual(passed(rule));
      expect(classifyStreamEvent(JSON.stringify({ type: 'error', error: { type: code } }))).toEqual(passed(rule));
    });

    it('a 413 carrying a quota code is a quota, not a body-size rejection', () => {
      expect(classifyResponse({ status: 413, body: JSON.stringify({ error: { code: 'insufficient_quota' } }) })).toEqual(passed('quota'));
    });

    it('an Anthropic permission_error is auth, though its message names no key problem', () => {
      // https://docs.anthropic.com/en/api/errors (403 permission_error)
      const body = JSON.stringify({
        type: 'error',
        error: { type: 'permission_error', message: 'Your API key does not have permission to use the specified resource.' },
      });
      expect(classifyResponse({ status: 403, body })).toEqual(passed('auth'));
    });

    it('an Anthropic authentication_error is auth', () => {
      const body = JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
      expect(classifyResponse({ status: 401, body })).toEqual(passed('auth'));
    });

    it('a rate limit that fails a Responses stream is rate_limit', () => {
      // Codex's streaming client reads this failed event (the code index, TestCodexStreamingResponseReportsFailedEvent)
      const event =
        '{"type":"response.failed","response":{"error":{"code":"rate_limit_exceeded","message":"Rate limit reached. Please try again in 11.054s."}}}';
      expect(classifyStreamEvent(event)).toEqual(passed('rate_limit'));
    });
  });

  describe('string_above_max_length: message content or schema', () => {
    it('is overlong on a Responses input sent as one string (param "input")', () => {
      const body = JSON.stringify({
        error: {
          message:
            "Invalid 'input': string too long. Expected a string with maximum length 10485760, but got a string with length 62114761 instead.",
          type: 'invalid_request_error',
          param: 'input',
          code: 'string_above_max_length',
        },
      });
      expect(classifyResponse({ status: 400, body })).toMatchObject({ overlong: true, reason: C, rule: 'string_above_max_length' });
    });
  });
});
