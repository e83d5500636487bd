import { describe, expect, it } from 'vitest';
import { rulesWithout } from '../../scripts/lofo.js';
import { limitReader } from '../../src/overlong/numbers.js';
import { RULES, STATEMENTS, type Rule } from '../../src/overlong/rules.js';
import type { StatedLimits } from '../../src/overlong/types.js';

// The numbers each real wording states, read by the specific rules alone (the general reading
// in quantities.ts fills gaps in the verdict, so only a limit reader shows what these patterns
// read), written out literally; and with the wording's family switched off, nothing. The one
// decision the numbers support (a completion that leaves the prompt no room) is in room.test.ts.
/** The numbers the given rules' wordings state, as a classifier built from them reads them. */
const readerOf = (rules: readonly Rule[]) => limitReader(STATEMENTS.filter((r) => rules.includes(r)));
const extractLimits = readerOf(RULES);
// [fixture the text comes from, family, message text, numbers read, numbers with the family off]
// prettier-ignore
const WORDINGS: [string, string, string, StatedLimits, StatedLimits][] = [
  ["openai-ctx-messages-compact", 'openai', "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.", { limitTokens: 4097, promptTokens: 4294 }, {}],
  ["openai-ctx-messages-plus-completion-pretty", 'openai', "This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.", { limitTokens: 4097, promptTokens: 3120, completionTokens: 1000 }, {}],
  ["openai-legacy-completions-wording", 'openai', "This model's maximum context length is 8192 tokens, however you requested 8977 tokens (8977 in your prompt; 0 for the completion). Please reduce your prompt; or completion length.", { limitTokens: 8192, promptTokens: 8977, completionTokens: 0 }, {}],
  // the legacy completions wording with a stated completion (a body pasted in a public repository)
  ['openai legacy, 256 for the completion', 'openai', "This model's maximum context length is 4097 tokens, however you requested 5443 tokens (5187 in your prompt; 256 for the completion). Please reduce your prompt; or completion length.", { limitTokens: 4097, promptTokens: 5187, completionTokens: 256 }, {}],
  ["openrouter-endpoint-ctx-input", 'openai', "This endpoint's maximum context length is 32768 tokens. However, you requested about 42832 tokens (42832 of text input). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically.", { limitTokens: 32768, promptTokens: 42832 }, {}],
  ["openrouter-output-reservation-equals-window", 'openai', "This endpoint's maximum context length is 131072 tokens. However, you requested about 141607 tokens (10535 of text input, 131072 in the output). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically.", { limitTokens: 131072, promptTokens: 10535, completionTokens: 131072 }, {}],
  ["vllm-ctx-new-format", 'vllm', "This model's maximum context length is 4096 tokens. However, you requested 1 output tokens and your prompt contains at least 4096 input tokens, for a total of at least 4097 tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=4096)", { limitTokens: 4096, completionTokens: 1, promptTokens: 4096 }, { limitTokens: 4096 }],
  // vLLM's exact-count form of the same wording (vllm/renderers/params.py: no "at least")
  ['vllm token check', 'vllm', "This model's maximum context length is 4096 tokens. However, you requested 1024 output tokens and your prompt contains 3800 input tokens, for a total of 4824 tokens. Please reduce the length of the input prompt or the number of requested output tokens.", { limitTokens: 4096, completionTokens: 1024, promptTokens: 3800 }, { limitTokens: 4096 }],
  // the same through Bedrock's OpenAI-compatible endpoint (GLM-5), pasted in a public write-up
  ['vllm via bedrock', 'vllm', "This model's maximum context length is 202752 tokens. However, you requested 64000 output tokens and your prompt contains at least 138753 input tokens, for a total of at least 202753 tokens. Please reduce the length of the input prompt or the number of requested output tokens.", { limitTokens: 202752, completionTokens: 64000, promptTokens: 138753 }, { limitTokens: 202752 }],
  ["vllm-max-tokens-equals-window-input-text", 'vllm', "This model's maximum context length is 131072 tokens. However, you requested 131072 output tokens and your prompt contains 14233 characters (more than 0 characters, which is the upper bound for 0 input tokens). Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_text, value=14233)", { limitTokens: 131072, completionTokens: 131072 }, { limitTokens: 131072 }],
  ["vllm-max-tokens-too-large-mentions-context-length", 'vllm', "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778). None", { limitTokens: 4096, promptTokens: 2778, completionTokens: 8000 }, { limitTokens: 4096 }],
  ["anthropic-prompt-too-long", 'anthropic', "prompt is too long: 200251 tokens > 200000 maximum", { promptTokens: 200251, limitTokens: 200000 }, {}],
  ["anthropic-input-plus-max-tokens", 'anthropic', "input length and `max_tokens` exceed context limit: 143653 + 64000 > 200000, decrease input length or `max_tokens` and try again", { promptTokens: 143653, completionTokens: 64000, limitTokens: 200000 }, {}],
  ["fireworks-prompt-too-long", 'anthropic', "The prompt is too long: 262377, model maximum context length: 262143", { promptTokens: 262377, limitTokens: 262143 }, {}],
  ["gemini-native-input-token-count", 'gemini', "The input token count (3475108) exceeds the maximum number of tokens allowed (1048576).", { promptTokens: 3475108, limitTokens: 1048576 }, {}],
  ["vertex-input-token-count-without-count", 'gemini', "The input token count exceeds the maximum number of tokens allowed 1048576.", { limitTokens: 1048576 }, {}],
  ["vertex-unable-to-submit-input-token-count", 'gemini', "Unable to submit request because the input token count is 1251952 but model only supports up to 1048576. Reduce the input token count and try again. You can also use the CountTokens API to calculate prompt token count and billable characters. Learn more: https://cloud.google.com/vertex-ai/generative-ai/docs/learn/models", { promptTokens: 1251952, limitTokens: 1048576 }, {}],
  ["mistral-ctx", 'mistral', "Prompt contains 159202 tokens and 0 draft tokens, too large for model with 131072 maximum context length", { promptTokens: 159202, limitTokens: 131072 }, {}],
  ["together-tgi-validation", 'tgi', "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 2019 `inputs` tokens and 30 `max_new_tokens`", { limitTokens: 2048, promptTokens: 2019, completionTokens: 30 }, {}],
  ["cohere-too-many-tokens", 'cohere', "too many tokens: total number of tokens (prompt and prediction) cannot exceed 2048 - received 6354. Try using a shorter prompt or a smaller max_tokens value.", { limitTokens: 2048 }, {}],
  ["dashscope-range-of-input-length", 'dashscope', "<400> InternalError.Algo.InvalidParameter: Range of input length should be [1, 204800]", { limitTokens: 204800 }, {}],
  ["llamacpp-exceed-context-size-v2", 'llamacpp', "request (25837 tokens) exceeds the available context size (25088 tokens), try increasing it", { promptTokens: 25837, limitTokens: 25088 }, {}],
  ["lmstudio-n-keep-gt-n-ctx", 'lmstudio', "The number of tokens to keep from the initial prompt is greater than the context length (n_keep: 13055>= n_ctx: 4096). Try to load the model with a larger context length, or provide a shorter input.", { promptTokens: 13055, limitTokens: 4096 }, {}],
  ["lmstudio-trying-to-keep-in-stream", 'lmstudio', "Trying to keep the first 14538 tokens when context the overflows. However, the model is loaded with context length of only 2048 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input", { promptTokens: 14538, limitTokens: 2048 }, {}],
  ["xai-maximum-prompt-length", 'xai', "This model's maximum prompt length is 131072 but the request contains 136973 tokens.", { limitTokens: 131072, promptTokens: 136973 }, {}],
  ["xai-input-too-large-budget", 'xai', "Failed to start sampling: [input_too_large] Current message (1149677 tokens) exceeds budget (975424 tokens)", { promptTokens: 1149677, limitTokens: 975424 }, {}],
  ["sglang-input-longer-than-context", 'sglang', "The input (61709 tokens) is longer than the model's context length (40960 tokens).", { promptTokens: 61709, limitTokens: 40960 }, {}],
  ["sglang-requested-token-count-completion-fills-window", 'sglang', "Requested token count exceeds the model's maximum context length of 64000 tokens. You requested a total of 71897 tokens: 7897 tokens from the input messages and 64000 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.", { limitTokens: 64000, promptTokens: 7897, completionTokens: 64000 }, {}],
  ["openai-gpt5-input-tokens-configured-limit", 'openai', "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 289650 tokens. Please reduce the length of the messages.", { promptTokens: 289650, limitTokens: 272000 }, {}],
  ["openai-embeddings-max-tokens-per-request", 'openai', "Requested 319487 tokens, max 300000 tokens per request", { promptTokens: 319487, limitTokens: 300000 }, {}],
  ["moonshot-exceeded-model-token-limit", 'moonshot', "Invalid request: Your request exceeded model token limit: 262144 (requested: 269030)", { limitTokens: 262144 }, {}],
  ["cerebras-current-length-over-limit", 'cerebras', "Please reduce the length of the messages or completion. Current length is 42328 while limit is 40000", { limitTokens: 40000 }, {}],
  ["gemini-413-max-request-body-size", 'http', "Maximum request body size 1048576 exceeded, actual body size 1056562", { limitBytes: 1048576, bodyBytes: 1056562 }, {}],
  ["aws-apigateway-413-content-length-exceeded", 'http', "HTTP content length exceeded 10485760 bytes.", { limitBytes: 10485760 }, {}],
  ['glm (tests/rules.test.ts)', 'glm', "The number of input tokens (140000) has exceeded max_prompt_tokens (131072)", { promptTokens: 140000, limitTokens: 131072 }, {}],
];

describe('the numbers each wording states', () => {
  it.each(WORDINGS.map((row) => [row[0], row] as const))('%s', (_id, [, family, text, stated, off]) => {
    expect(extractLimits(text, {})).toEqual(stated);
    expect(readerOf(rulesWithout(family))(text, {})).toEqual(off);
    expect(readerOf([])(text, {})).toEqual({});
  });
});

describe('numbers sent as fields', () => {
  it('fill what the text does not state (llama.cpp before it put the numbers in its message)', () => {
    const text = 'the request exceeds the available context size. try increasing the context size or enable context shift';
    expect(extractLimits(text, { promptTokens: 14429, limitTokens: 8192 })).toEqual({ promptTokens: 14429, limitTokens: 8192 });
  });

  it('never replace a number the text states', () => {
    const text = 'request (25837 tokens) exceeds the available context size (25088 tokens), try increasing it';
    expect(extractLimits(text, { promptTokens: 1, limitTokens: 2, completionTokens: 3 })).toEqual({
      promptTokens: 25837,
      limitTokens: 25088,
      completionTokens: 3,
    });
  });
});
