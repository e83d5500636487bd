import { describe, expect, it } from 'vitest';
import { prose } from '../../src/overlong/general.js';
import { readQuantities } from '../../src/overlong/quantities.js';

// The general number reader, one cue at a time. Each message is read the way classify reads it
// (its prose: underscores as spaces), and every number it yields is pinned: the limit, the
// input (prompt), the completion, a total, bytes, and which comparison holds ("over"). A cue
// that stops matching, or matches too much, changes one of these numbers.
type Read = Record<string, number | string[]>;

function numbers(message: string): Read {
  const { limits, totalTokens, excess, promptOverLimit, totalOverLimit, bodyOverLimit } = readQuantities(prose(message));
  const over = [promptOverLimit && 'prompt', totalOverLimit && 'total', bodyOverLimit && 'body'].filter((w) => w !== false);
  return {
    ...(limits as Read),
    ...(totalTokens === undefined ? {} : { totalTokens }),
    ...(excess === undefined ? {} : { excess }),
    ...(over.length > 0 ? { over } : {}),
  };
}

// Real provider messages: the fixtures (test/fixtures/upstream-errors.json) and a few more, each
// as its provider sends it (sources in the comments). The reading of a limit that caps the
// output (Groq, OpenAI's max_output_tokens) is right here: the number reader does not decide;
// the general layer sees the subject is max_tokens and does not call it an overflow.
const REAL: readonly [string, string, Read][] = [
  [
    'OpenAI',
    "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.",
    { limitTokens: 4097, totalTokens: 4294, over: ['total'] },
  ],
  [
    'OpenAI',
    "This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
    { limitTokens: 4097, promptTokens: 3120, completionTokens: 1000, totalTokens: 4120, over: ['prompt', 'total'] },
  ],
  [
    'OpenAI (legacy completions)',
    "This model's maximum context length is 8192 tokens, however you requested 8977 tokens (8977 in your prompt; 0 for the completion). Please reduce your prompt; or completion length.",
    { limitTokens: 8192, promptTokens: 8977, completionTokens: 0, totalTokens: 8977, over: ['prompt', 'total'] },
  ],
  [
    'OpenAI (gpt-5 input cap)',
    'Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 289650 tokens. Please reduce the length of the messages.',
    { limitTokens: 272000, totalTokens: 289650, over: ['total'] },
  ],
  [
    'OpenAI (embeddings)',
    'Requested 319487 tokens, max 300000 tokens per request',
    { limitTokens: 300000, totalTokens: 319487, over: ['total'] },
  ],
  [
    'OpenAI (string too long)',
    "Invalid 'messages[5].content': string too long. Expected a string with maximum length 10485760, but got a string with length 10605342 instead.",
    { limitTokens: 10485760 },
  ],
  [
    'OpenAI (429, TPM)',
    'Request too large for gpt-4o in organization org-2itOgSdqw0DhUYp0QyLhttLL on tokens per min (TPM): Limit 30000, Requested 36278. The input or output tokens must be reduced in order to run successfully.',
    { limitTokens: 30000, totalTokens: 36278, over: ['total'] },
  ],
  [
    'OpenAI (batch queue)',
    'Enqueued token limit reached for gpt-4o in organization XYZ. Limit: 90,000 enqueued tokens. Please try again once some in_progress batches have been completed.',
    { limitTokens: 90000 },
  ],
  [
    'OpenAI (batch queue, a larger tier)',
    'Enqueued token limit reached for text-embedding-3-small in organization org-???. Limit: 20,000,000 enqueued tokens. Please try again once some in_progress batches have been completed.',
    { limitTokens: 20000000 },
  ],
  [
    'OpenAI (max_tokens over the output cap)',
    'max_tokens is too large: 8192. This model supports at most 4096 completion tokens, whereas you provided 8192.',
    { completionTokens: 8192 },
  ],
  [
    'OpenAI (max_output_tokens over its maximum)',
    "Invalid 'max_output_tokens': integer above maximum value. Expected a value <= 128000, but got 200000 instead.",
    { limitTokens: 128000, totalTokens: 200000, over: ['total'] },
  ],
  [
    'OpenRouter',
    'This endpoint\'s maximum context length is 32768 tokens. However, you requested about 42832 tokens (42832 of text input). Please reduce the length of either one, or use the "middle-out" transform to compress your prompt automatically.',
    { limitTokens: 32768, promptTokens: 42832, totalTokens: 42832, over: ['prompt', 'total'] },
  ],
  [
    'OpenRouter (tools)',
    "This endpoint's maximum context length is 204800 tokens. However, you requested about 205432 tokens (81684 of text input, 3748 of tool input, 120000 in the output). Please reduce the length of either one",
    { limitTokens: 204800, promptTokens: 81684, completionTokens: 120000, totalTokens: 205432, over: ['total'] },
  ],
  ['Anthropic', 'prompt is too long: 200251 tokens > 200000 maximum', { promptTokens: 200251, limitTokens: 200000, over: ['prompt'] }],
  [
    'Anthropic (input + max_tokens)',
    'input length and `max_tokens` exceed context limit: 143653 + 64000 > 200000, decrease input length or `max_tokens` and try again',
    { promptTokens: 143653, completionTokens: 64000, limitTokens: 200000, over: ['prompt'] },
  ],
  [
    'Anthropic (max_tokens over the output cap)',
    'max_tokens: 128000 > 64000, which is the maximum allowed number of output tokens for claude-3-7-sonnet-20250219',
    { completionTokens: 128000 },
  ],
  [
    'Gemini',
    'The input token count (3475108) exceeds the maximum number of tokens allowed (1048576).',
    { promptTokens: 3475108, limitTokens: 1048576, over: ['prompt'] },
  ],
  [
    'Vertex AI',
    'Unable to submit request because the input token count is 1251952 but model only supports up to 1048576. Reduce the input token count and try again.',
    { promptTokens: 1251952, limitTokens: 1048576, over: ['prompt'] },
  ],
  [
    'Google front end (413)',
    'Maximum request body size 1048576 exceeded, actual body size 1056562',
    { limitBytes: 1048576, bodyBytes: 1056562, over: ['body'] },
  ],
  [
    'Mistral',
    'Prompt contains 159202 tokens and 0 draft tokens, too large for model with 131072 maximum context length',
    { promptTokens: 159202, limitTokens: 131072, over: ['prompt'] },
  ],
  ['Mistral (embeddings)', 'Too many tokens in batch. Max is 16384 got 17555', { limitTokens: 16384, totalTokens: 17555, over: ['total'] }],
  [
    'Cohere',
    'too many tokens: total number of tokens (prompt and prediction) cannot exceed 2048 - received 6354. Try using a shorter prompt or a smaller max tokens value.',
    { limitTokens: 2048, totalTokens: 6354, over: ['total'] },
  ],
  [
    'Cohere (excess)',
    "too many tokens: size limit exceeded by 1502 tokens. Try using shorter or fewer inputs, or setting prompt_truncation='AUTO'.",
    { excess: 1502 },
  ],
  [
    'Groq (max_tokens over the output cap)',
    '`max_tokens` must be less than or equal to `8192`, the maximum value for `max_tokens` is less than the `context_window` for this model',
    { limitTokens: 8192 },
  ],
  [
    'Groq (max_completion_tokens over the output cap)',
    '`max_completion_tokens` must be less than or equal to `16384`, the maximum value for `max_completion_tokens` is less than the `context_window` for this model',
    {},
  ],
  [
    'TGI',
    'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 2019 `inputs` tokens and 30 `max_new_tokens`',
    { limitTokens: 2048, promptTokens: 2019, completionTokens: 30, over: ['prompt'] },
  ],
  [
    'TGI (line break)',
    'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 16384\nGiven: 70655 `inputs` tokens and 1024 `max_new_tokens`',
    { limitTokens: 16384, promptTokens: 70655, completionTokens: 1024, over: ['prompt'] },
  ],
  [
    'TEI',
    'Input validation error: `inputs` must have less than 512 tokens. Given: 600',
    { limitTokens: 512, totalTokens: 600, over: ['total'] },
  ],
  [
    'vLLM',
    "This model's maximum context length is 4096 tokens. However, you requested 1 output tokens and your prompt contains at least 4096 input tokens, for a total of at least 4097 tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=4096)",
    { limitTokens: 4096, completionTokens: 1, promptTokens: 4096, over: ['prompt'] },
  ],
  ['vLLM (max_tokens, first sentence alone)', "'max_tokens' or 'max_completion_tokens' is too large: 8000.", { completionTokens: 8000 }],
  [
    'vLLM (max_tokens, second sentence alone)',
    "This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).",
    { completionTokens: 8000, limitTokens: 4096, promptTokens: 2778, over: ['prompt'] },
  ],
  [
    'vLLM (max_tokens over max_model_len)',
    'max_tokens=16384 cannot be greater than max_model_len=max_total_tokens=8192. Please request fewer output tokens. (parameter=max_tokens, value=16384)',
    { completionTokens: 16384, limitTokens: 8192 },
  ],
  ['vLLM (old)', 'max_tokens must be at least 1, got -186.', {}],
  [
    'vLLM (embeddings)',
    "This model's maximum context length is 512 tokens. However, you requested 600 tokens in the input for embedding generation. Please reduce the length of the input.",
    { limitTokens: 512, promptTokens: 600, over: ['prompt'] },
  ],
  [
    'vLLM (v1)',
    'The decoder prompt (length 17772) is longer than the maximum model length of 16384. Make sure that `max_model_len` is no smaller than the number of text tokens.',
    { promptTokens: 17772, limitTokens: 16384, over: ['prompt'] },
  ],
  [
    'vLLM (multimodal)',
    'The prompt (total length 25938) is too long to fit into the model (context length 4096).',
    { limitTokens: 4096, totalTokens: 25938, over: ['total'] },
  ],
  [
    'SGLang',
    "The input (61709 tokens) is longer than the model's context length (40960 tokens).",
    { promptTokens: 61709, limitTokens: 40960, over: ['prompt'] },
  ],
  [
    'SGLang (completion fills the window)',
    "Requested token count exceeds the model's maximum context length of 64000 tokens. You requested a total of 71897 tokens: 7897 tokens from the input messages and 64000 tokens for the completion.",
    { limitTokens: 64000, promptTokens: 7897, completionTokens: 64000, totalTokens: 71897, over: ['prompt', 'total'] },
  ],
  [
    'llama.cpp',
    'request (25837 tokens) exceeds the available context size (25088 tokens), try increasing it',
    { promptTokens: 25837, limitTokens: 25088, over: ['prompt'] },
  ],
  ['llama-cpp-python', 'Requested tokens (9437) exceed context window of 8192', { limitTokens: 8192, totalTokens: 9437, over: ['total'] }],
  [
    'LM Studio',
    'The number of tokens to keep from the initial prompt is greater than the context length (n_keep: 13055>= n_ctx: 4096).',
    { promptTokens: 13055, limitTokens: 4096, over: ['prompt'] },
  ],
  [
    'LM Studio (in stream)',
    'Trying to keep the first 14538 tokens when context the overflows. However, the model is loaded with context length of only 2048 tokens, which is not enough.',
    { limitTokens: 2048 },
  ],
  [
    'xAI',
    "This model's maximum prompt length is 131072 but the request contains 136973 tokens.",
    { limitTokens: 131072, promptTokens: 136973, over: ['prompt'] },
  ],
  [
    'xAI (budget)',
    'Failed to start sampling: [input too large] Current message (1149677 tokens) exceeds budget (975424 tokens)',
    { promptTokens: 1149677, limitTokens: 975424, over: ['prompt'] },
  ],
  [
    'Moonshot',
    'Invalid request: Your request exceeded model token limit: 262144 (requested: 269030)',
    { limitTokens: 262144, totalTokens: 269030, over: ['total'] },
  ],
  ['MiniMax', 'invalid params, context window exceeds limit (2013)', {}],
  [
    'Cerebras',
    'Please reduce the length of the messages or completion. Current length is 42328 while limit is 40000',
    { limitTokens: 40000, totalTokens: 42328, over: ['total'] },
  ],
  [
    'Fireworks',
    'The prompt is too long: 262377, model maximum context length: 262143',
    { promptTokens: 262377, limitTokens: 262143, over: ['prompt'] },
  ],
  ['Zhipu', "Request 182387 input tokens exceeds the model's maximum context length 202750", { promptTokens: 182387, limitTokens: 202750 }],
  [
    'Volcengine Ark',
    'Input length 203743 exceeds the maximum length 202752',
    { promptTokens: 203743, limitTokens: 202752, over: ['prompt'] },
  ],
  ['ds4', 'Prompt tokens (40321) exceeds context size (32768)', { promptTokens: 40321, limitTokens: 32768, over: ['prompt'] }],
  [
    'rkllm',
    'Prompt is 11543 tokens but the model context window is 4096 tokens.',
    { promptTokens: 11543, limitTokens: 4096, over: ['prompt'] },
  ],
  ['DashScope', 'Range of input length should be [1, 204800]', {}],
];
// Not in the fixtures: "Limit: 90,000 / 20,000,000 enqueued tokens" (OpenAI Batch, quoted in many
// repositories), "Requested tokens (9437) exceed context window of 8192" (llama-cpp-python's
// ValueError), "tokens in the input for embedding generation" (vLLM's embeddings check),
// "(81684 of text input, 3748 of tool input, 120000 in the output)" (OpenRouter, in
// boldsoftware/shelley#159), "max_tokens=16384 cannot be greater than max_model_len=..." (vLLM, in
// mateaix/mateclaw#481), "`max_tokens` must be less than or equal to `8192`" (Groq; quoted with
// 512, 8192 and 16384 in several repositories), TEI's "`inputs` must have less than 512 tokens. Given: 600", and OpenAI's
// integer check "Expected a value <= 128000, but got 200000 instead". The two vLLM sentences of
// its max_tokens error are read one at a time too: the first names only the completion, the
// second states all three numbers only as "8000 > 4096 - 2778".

describe('numbers read from real errors', () => {
  it.each(REAL)('%s: %s', (_provider, message, expected) => {
    expect(numbers(message)).toEqual(expected);
  });

  // Reformatted messages (a proxy re-wrapping text, a pasted log) can carry two spaces where
  // the provider wrote one: a word after a number is found across any run of spaces. (Not the
  // arithmetic "A + B > C", nor "by N tokens": those take the spacing providers write.)
  const SPACED = REAL.filter(([provider]) => !/input \+ max_tokens|second sentence|excess|DashScope|MiniMax/.test(provider));
  it.each(SPACED)('%s, with two spaces after each number', (_provider, message, expected) => {
    expect(numbers(message.replace(/(\d) /g, '$1  '))).toEqual(expected);
  });
});

describe('the cue words, one at a time', () => {
  // vLLM's sentence with the other names the same request field has (TGI, Gemini, Ollama, the
  // Responses API, the newer chat name): each is the completion, never the window.
  it.each(['max_new_tokens', 'maxOutputTokens', 'num_predict', 'max_output_tokens', 'max_completion_tokens'])(
    '%s=N is the requested completion',
    (name) => {
      expect(
        numbers(`${name}=16384 cannot be greater than max_model_len=max_total_tokens=8192. Please request fewer output tokens.`),
      ).toEqual({
        completionTokens: 16384,
        limitTokens: 8192,
      });
    },
  );

  it('reads "N `max_tokens`" after a number as the completion, not as a "max" limit', () => {
    // TGI's sentence with the field named as the OpenAI-compatible route names it.
    expect(
      numbers('Input validation error: `inputs` tokens + `max_tokens` must be <= 4096. Given: 3000 `inputs` tokens and 1500 `max_tokens`'),
    ).toEqual({
      limitTokens: 4096,
      promptTokens: 3000,
      completionTokens: 1500,
      over: ['prompt'],
    });
  });

  it.each([
    // A count of one, in the singular.
    [
      "This model's maximum context length is 4096 tokens. However, you requested 1 output token and your prompt contains 4096 input tokens.",
      { limitTokens: 4096, completionTokens: 1, promptTokens: 4096, over: ['prompt'] },
    ],
    [
      'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 1 `inputs` token and 4096 `max_new_tokens`',
      { limitTokens: 4096, promptTokens: 1, completionTokens: 4096, over: ['prompt'] },
    ],
    [
      'You requested a total of 64001 tokens: 1 token from the input messages and 64000 tokens for the completion.',
      { promptTokens: 1, completionTokens: 64000, totalTokens: 64001 },
    ],
    [
      'You requested a total of 64001 tokens: 64000 tokens from the input messages and 1 token for the completion.',
      { promptTokens: 64000, completionTokens: 1, totalTokens: 64001 },
    ],
    ['too many tokens: size limit exceeded by 1 token.', { excess: 1 }],
    // Without the article, or with one message.
    [
      'You requested a total of 71897 tokens: 7897 tokens from input messages and 64000 tokens for completion.',
      { promptTokens: 7897, completionTokens: 64000, totalTokens: 71897 },
    ],
    [
      'However, you requested 4120 tokens (3120 in messages, 1000 in completion).',
      { promptTokens: 3120, completionTokens: 1000, totalTokens: 4120 },
    ],
    [
      'However, you requested 4120 tokens (3120 in the message, 1000 in the completion).',
      { promptTokens: 3120, completionTokens: 1000, totalTokens: 4120 },
    ],
  ] as [string, Read][])('singular and plural, with or without "the": %s', (message, expected) => {
    expect(numbers(message)).toEqual(expected);
  });

  it.each([
    ['Your messages exceed the 4096-token context window.', { limitTokens: 4096 }],
    ['Your messages exceed the 4096 token context window.', { limitTokens: 4096 }],
    ['Your messages exceed the 4096 token limit.', { limitTokens: 4096 }],
    ['The input is too long: 4097 tokens, only 4096 tokens allowed.', { promptTokens: 4097, limitTokens: 4096, over: ['prompt'] }],
  ] as [string, Read][])('a limit named after its number: %s', (message, expected) => {
    expect(numbers(message)).toEqual(expected);
  });

  it('finds "tokens allowed" across two spaces', () => {
    expect(numbers('The input is too long: 4097  tokens, only 4096  tokens allowed.')).toEqual({
      promptTokens: 4097,
      limitTokens: 4096,
      over: ['prompt'],
    });
  });

  it('reaches 32 characters from a limit word to the "is" before the number, not more', () => {
    expect(numbers('The context length supported by the selected model is 4096 tokens')).toEqual({ limitTokens: 4096 });
    expect(numbers('The context length supported by the selected model family is 4096 tokens')).toEqual({});
  });

  it.each([
    ['This request would exceed the context window by 3000 tokens.', 3000],
    ['Your input exceeds the context window of this model by 3000 tokens.', 3000],
  ])('reads how far over from "exceed ... by N tokens": %s', (message, excess) => {
    expect(numbers(message)).toEqual({ excess });
  });
});

describe('sizes in bytes', () => {
  it.each([
    ['Request body is too large: the maximum size is 10 MB', 10_000_000],
    ['Request body is too large: the maximum size is 10 KiB', 10_240],
    ['Request body is too large: the maximum size is 2 GB', 2_000_000_000],
    ['Request body is too large: the maximum size is 1 mib', 1_048_576],
    ['Request payload size exceeds the limit: 20971520 bytes.', 20_971_520],
  ])('a limit stated in K, M or G is counted in bytes: %s', (message, limitBytes) => {
    // Read as 10 bytes, "10 MB" would teach the gateway a 10-byte limit for the model.
    expect(numbers(message)).toEqual({ limitBytes });
    expect(numbers(message.replace(/(\d) /g, '$1  '))).toEqual({ limitBytes });
  });

  it('does not read a decimal as a count ("10.5 MB" is neither 10 nor 5)', () => {
    expect(numbers('Payload size 10.5 MB exceeds the maximum of 10 MB')).toEqual({ limitBytes: 10_000_000 });
  });

  it('counts a size in MB as bytes with no other word for bytes near it', () => {
    expect(numbers('The image exceeds the maximum of 5 MB')).toEqual({ limitBytes: 5_000_000 });
  });

  it('takes a received size as the body, against a byte limit', () => {
    expect(numbers('Request body too large: received 12000000 bytes, the limit is 10485760 bytes.')).toEqual({
      bodyBytes: 12_000_000,
      limitBytes: 10_485_760,
      over: ['body'],
    });
  });
});

describe('sizes in characters', () => {
  // Characters are compared with a character limit only; no token field is filled from them.
  it.each([
    ['The prompt has 12000 characters, more than the maximum of 10000 characters.', { over: ['prompt'] }],
    ['The input text is too long: received 12000 characters, the limit is 10000 characters.', { over: ['prompt'] }],
    ['The input text is too long: received 9000 characters, the limit is 10000 characters.', {}],
    // The unit named just before the number.
    ['Input length in characters: 12000 (maximum length in characters: 10000)', { over: ['prompt'] }],
    ['Input length in characters: 9000 (maximum length in characters: 10000)', {}],
  ] as [string, Read][])('%s', (message, expected) => {
    expect(numbers(message)).toEqual(expected);
  });
});

describe('over the limit, or not', () => {
  it.each([
    [
      'request (4096 tokens) exceeds the available context size (4096 tokens), try increasing it',
      { promptTokens: 4096, limitTokens: 4096 },
    ],
    [
      'request (4097 tokens) exceeds the available context size (4096 tokens), try increasing it',
      { promptTokens: 4097, limitTokens: 4096, over: ['prompt'] },
    ],
    ['Requested tokens (4096) exceed context window of 4096', { limitTokens: 4096, totalTokens: 4096 }],
    ['Requested tokens (4097) exceed context window of 4096', { limitTokens: 4096, totalTokens: 4097, over: ['total'] }],
    ['Maximum request body size 1048576 exceeded, actual body size 1048576', { limitBytes: 1_048_576, bodyBytes: 1_048_576 }],
    [
      'Maximum request body size 1048576 exceeded, actual body size 1048577',
      { limitBytes: 1_048_576, bodyBytes: 1_048_577, over: ['body'] },
    ],
    // The input and the requested completion together: equal to the window fits, one more does not.
    [
      'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 3096 `inputs` tokens and 1000 `max_new_tokens`',
      { limitTokens: 4096, promptTokens: 3096, completionTokens: 1000 },
    ],
    [
      'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 3097 `inputs` tokens and 1000 `max_new_tokens`',
      { limitTokens: 4096, promptTokens: 3097, completionTokens: 1000, over: ['prompt'] },
    ],
  ] as [string, Read][])('%s', (message, expected) => {
    // Equal to the limit fits: only a number above it is over.
    expect(numbers(message)).toEqual(expected);
  });
});

describe('a statement ends at a full stop or a line break', () => {
  // The words of one statement never name a number of the next.
  it.each([
    ['Maximum context length exceeded. 5000 tokens were sent.', {}],
    ['Maximum context length exceeded:\n5000 tokens were sent.', {}],
    // The second statement's "maximum output tokens" is not about the first one's 8192.
    ['max_tokens is too large: 8192. The maximum output tokens for this model is 4096.', { completionTokens: 8192, limitTokens: 4096 }],
  ] as [string, Read][])('%s', (message, expected) => {
    expect(numbers(message)).toEqual(expected);
  });

  it('looks at the first 192 statement ends of a text', () => {
    const after = (statements: number) => `${'Maximum context length exceeded. '.repeat(statements)}5000 tokens were sent.`;
    expect(numbers(after(192))).toEqual({});
    // The 193rd end is not seen: the statement before it reaches the number.
    expect(numbers(after(193))).toEqual({ limitTokens: 5000 });
  });
});

describe('hostile or odd input', () => {
  it('does not read a count too large to be exact', () => {
    expect(numbers('Limit: 90,000,000,000,000,000,000 enqueued tokens. Limit: 90,000 enqueued tokens.')).toEqual({ limitTokens: 90_000 });
  });

  it('starts each text afresh after one that held more numbers than it reads', () => {
    const crowded = 'The limit is 4096 tokens. '.repeat(60);
    expect(numbers(crowded)).toEqual({ limitTokens: 4096 });
    expect(numbers('prompt is too long: 200251 tokens > 200000 maximum')).toEqual({
      promptTokens: 200_251,
      limitTokens: 200_000,
      over: ['prompt'],
    });
  });
});
