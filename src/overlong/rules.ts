/**
 * Codes, phrases and number statements as one provider family words them; a deciding phrase reads its numbers by named groups. Each
 * entry names its family so `npm run classify:lofo` can leave it out; each has a fixture (test/fixtures/upstream-errors.json) or a
 * test. Phrases are anchored on several words: a bare "context" or "too long" never decides.
 */
import type { OverlongReason } from './types.js';

export interface Signal {
  rule: string;
  reason: OverlongReason;
}

export interface PhraseRule {
  family: string;
  rule: string;
  pattern: RegExp;
}

export interface OverlongPhrase extends PhraseRule {
  reason: OverlongReason;
}

export interface CodeRule {
  family: string;
  code: string;
  reason: OverlongReason;
}

/** A wording that states numbers only, for a verdict a phrase, a code or the general layer reached. */
export interface NumberPattern {
  family: string;
  /** Named groups (limitTokens, promptTokens, completionTokens, limitBytes, bodyBytes) hold the numbers (numbers.ts NUMBER_GROUPS). */
  pattern: RegExp;
}

export type Rule = CodeRule | PhraseRule | NumberPattern;

/** Error codes / types that mean the request is too long, whatever the status. */
export const OVERLONG_CODES: readonly CodeRule[] = [
  { family: 'openai', code: 'context_length_exceeded', reason: 'context_length' }, // OpenAI, Azure, Groq, Responses stream
  { family: 'llamacpp', code: 'exceed_context_size_error', reason: 'context_length' },
  { family: 'openai', code: 'max_tokens_per_request', reason: 'context_length' }, // embeddings batch cap
  { family: 'anthropic', code: 'request_too_large', reason: 'body_too_large' }, // Anthropic edge (32 MB)
  { family: 'http', code: 'fst_err_ctp_body_too_large', reason: 'body_too_large' }, // fastify bodyLimit
];

/** Codes that settle "not overlong" where their own words do not (general.ts codeWords reads rate_limit_exceeded and kin as words). */
export const NOT_OVERLONG_CODES: ReadonlyMap<string, string> = new Map([
  ['permission_error', 'auth'], // Anthropic 403: "Your API key does not have permission to use the specified resource."
]);

/** `string_above_max_length` is overlong on message content, a schema error on tool definitions. */
export const SCHEMA_PATH =
  /^(?:tools|functions|tool_choice|response_format|metadata|instructions|model|user)\b|\.function\.(?:name|description)|\.(?:name|role|id|call_id)$/;
export const CONTENT_PATH = /^(?:messages|input|prompt|contents)(?:\[|\.|$)/;
/** The completion limit's fields: a size complaint about one is a value cap (the clamp's business), never an overflow. */
export const COMPLETION_PATH =
  /^(?:max_tokens|max_completion_tokens|max_output_tokens|max_new_tokens|num_predict|(?:generation_?config\.)?max_?output_?tokens)$/i;
/** One value's size as schema validators word it: a string or array over its maximum length, a number over its maximum, a name. */
export const SIZE_COMPLAINT =
  /\b(?:string|array|list) too long\b|\b(?:with )?(?:a )?max(?:imum)? length(?: of)?\b|\bat most \d{1,9} (?:characters|chars|items|elements|entries|bytes)\b|\bshould have at most\b|\b(?:integer|number|value) above (?:the )?max(?:imum)? value\b|\bexpected a value <=|\bcannot exceed \d{1,9}\b/i;

const CONTEXT: OverlongReason = 'context_length';
const BODY: OverlongReason = 'body_too_large';

/** Phrases that mean "too big, but not the prompt": the fix is elsewhere. */
export const NOT_OVERLONG_PHRASES: readonly PhraseRule[] = [
  // max_tokens above the model's output cap (OpenAI, Anthropic, Groq)
  { family: 'openai', rule: 'output_token_cap', pattern: /\bmax_tokens is too large\b/i },
  { family: 'openai', rule: 'output_token_cap', pattern: /\bsupports at most \d{1,12} completion tokens\b/i },
  { family: 'anthropic', rule: 'output_token_cap', pattern: /\bmaximum allowed number of output tokens\b/i },
  { family: 'groq', rule: 'output_token_cap', pattern: /`?max_completion_tokens`? must be less than or equal to\b/i },
  { family: 'groq', rule: 'output_token_cap', pattern: /`?max_tokens`? must be less than or equal to\b/i },
  // a single attachment over its own limit (Anthropic)
  { family: 'anthropic', rule: 'attachment_limit', pattern: /\bimage exceeds \d{1,6} ?MB maximum\b/i },
  { family: 'anthropic', rule: 'attachment_limit', pattern: /\bimage dimensions exceed max allowed size\b/i },
];

/** Signed state bound to its prefix, or the opt-in to drop it (Anthropic's preserved thinking; Bedrock alike): never an overflow. */
export const BINDING_PHRASES: readonly PhraseRule[] = [
  // "messages.5.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation. ..."
  { family: 'anthropic', rule: 'thinking_bound_elsewhere', pattern: /\bInvalid `?signature`? in `?(?:redacted_)?thinking`? block\b/i },
  // "thinking.adaptive.block_binding: Extra inputs are not permitted" (the opt-in without its beta)
  { family: 'anthropic', rule: 'block_binding_not_permitted', pattern: /\bblock_binding`?: Extra inputs are not permitted\b/i },
  // "... When thinking is enabled, a final assistant message must start with a thinking block."
  { family: 'anthropic', rule: 'thinking_must_lead', pattern: /\bfinal assistant message must start with a thinking block\b/i },
];

/** Tried in order; named groups are the stated numbers (optional tails decide without them); bounded digit runs, no nested quantifiers. */
export const OVERLONG_PHRASES: readonly OverlongPhrase[] = [
  // OpenAI family: OpenAI, Azure, DeepSeek, vLLM, FastChat, text-generation-webui, OpenRouter ("This endpoint's ...")
  {
    family: 'openai',
    rule: 'maximum_context_length',
    reason: CONTEXT,
    pattern: /\bmaximum context length is (?<limitTokens>\d{1,12}) tokens/i,
  },
  { family: 'openai', rule: 'reduce_your_prompt', reason: CONTEXT, pattern: /\bplease reduce your prompt; or completion length\b/i },
  // OpenAI / Azure (gpt-5 input cap)
  {
    family: 'openai',
    rule: 'input_tokens_exceed_configured_limit',
    reason: CONTEXT,
    pattern: /\binput tokens exceed the configured limit of (?<limitTokens>\d{1,12}) tokens/i,
  },
  { family: 'openai', rule: 'input_exceeds_context_window', reason: CONTEXT, pattern: /\byour input exceeds the context window\b/i },
  // OpenAI embeddings
  {
    family: 'openai',
    rule: 'tokens_per_request',
    reason: CONTEXT,
    pattern: /\brequested (?<promptTokens>\d{1,12}) tokens, max (?<limitTokens>\d{1,12}) tokens per request\b/i,
  },
  // Anthropic, Bedrock (Claude): "prompt is too long: N tokens > M maximum"; Fireworks: "prompt is too long: N, model maximum context length: M"
  {
    family: 'anthropic',
    rule: 'prompt_too_long',
    reason: CONTEXT,
    pattern:
      /\bprompt is too long\b(?:: (?<promptTokens>\d{1,12})(?: tokens >|, model maximum context length:) (?<limitTokens>\d{1,12}))?/i,
  },
  {
    family: 'anthropic',
    rule: 'input_and_max_tokens_exceed_context',
    reason: CONTEXT,
    pattern:
      /\binput length and `?max_tokens`? exceed context limit\b(?:: (?<promptTokens>\d{1,12}) \+ (?<completionTokens>\d{1,12}) > (?<limitTokens>\d{1,12}))?/i,
  },
  // Bedrock
  { family: 'bedrock', rule: 'input_too_long_for_model', reason: CONTEXT, pattern: /\binput is too long for (?:the )?requested model\b/i },
  // Gemini API, Vertex AI
  {
    family: 'gemini',
    rule: 'input_token_count_exceeds',
    reason: CONTEXT,
    pattern:
      /\binput token count (?:\((?<promptTokens>\d{1,12})\) )?exceeds the maximum number of tokens allowed\b(?: \(?(?<limitTokens>\d{1,12}))?/i,
  },
  {
    family: 'gemini',
    rule: 'input_token_count_over_model_limit',
    reason: CONTEXT,
    pattern: /\binput token count is (?<promptTokens>\d{1,12}) but model only supports up to\b(?: (?<limitTokens>\d{1,12}))?/i,
  },
  // Mistral
  {
    family: 'mistral',
    rule: 'too_large_for_model_context',
    reason: CONTEXT,
    pattern: /\btoo large for model with (?<limitTokens>\d{1,12}) maximum context length\b/i,
  },
  // TGI, Together
  {
    family: 'tgi',
    rule: 'tgi_inputs_plus_max_new_tokens',
    reason: CONTEXT,
    pattern:
      /`?inputs`? tokens \+ `?max_new_tokens`? must be <= (?<limitTokens>\d{1,12})(?:\. Given: (?<promptTokens>\d{1,12}) `?inputs`? tokens and (?<completionTokens>\d{1,12}) `?max_new_tokens`?)?/i,
  },
  // Cohere v1 counts prompt and prediction together, so only the limit is usable
  {
    family: 'cohere',
    rule: 'cohere_total_tokens',
    reason: CONTEXT,
    pattern: /\btotal number of tokens \(prompt and prediction\) cannot exceed\b(?: (?<limitTokens>\d{1,12}))?/i,
  },
  // DashScope (Qwen)
  {
    family: 'dashscope',
    rule: 'input_length_range',
    reason: CONTEXT,
    pattern: /\brange of input length should be \[(?:\d{1,12}, ?(?<limitTokens>\d{1,12})\])?/i,
  },
  // llama.cpp server (older builds state the numbers only as JSON fields, see evidence.ts)
  {
    family: 'llamacpp',
    rule: 'exceeds_available_context_size',
    reason: CONTEXT,
    pattern:
      /(?:request \((?<promptTokens>\d{1,12}) tokens\) )?\bexceeds the available context size\b(?: \((?<limitTokens>\d{1,12}) tokens\))?/i,
  },
  { family: 'llamacpp', rule: 'context_size_exceeded', reason: CONTEXT, pattern: /\bcontext size has been exceeded\b/i },
  // LM Studio
  {
    family: 'lmstudio',
    rule: 'tokens_to_keep_exceed_context',
    reason: CONTEXT,
    pattern:
      /\btokens to keep from the initial prompt is greater than the context length\b(?: \(n_keep: (?<promptTokens>\d{1,12}) ?>= ?n_ctx: (?<limitTokens>\d{1,12}))?/i,
  },
  {
    family: 'lmstudio',
    rule: 'keep_first_tokens_overflow',
    reason: CONTEXT,
    pattern: /\btrying to keep the first (?<promptTokens>\d{1,12}) tokens when context\b/i,
  },
  // Ollama
  { family: 'ollama', rule: 'prompt_longer_than_context', reason: CONTEXT, pattern: /\bthe prompt is longer than the context length\b/i },
  { family: 'ollama', rule: 'input_length_exceeds_context', reason: CONTEXT, pattern: /\bthe input length exceeds the context length\b/i },
  // xAI
  {
    family: 'xai',
    rule: 'maximum_prompt_length',
    reason: CONTEXT,
    pattern: /\bmaximum prompt length is (?<limitTokens>\d{1,12}) but the request contains\b(?: (?<promptTokens>\d{1,12}) tokens)?/i,
  },
  {
    family: 'xai',
    rule: 'input_too_large',
    reason: CONTEXT,
    pattern:
      /\[input_too_large\](?: current message \((?<promptTokens>\d{1,12}) tokens\) exceeds budget \((?<limitTokens>\d{1,12}) tokens\))?/i,
  },
  // SGLang
  {
    family: 'sglang',
    rule: 'input_longer_than_context',
    reason: CONTEXT,
    pattern:
      /(?:the input \((?<promptTokens>\d{1,12}) )?\btokens\) is longer than the model.{1,3}s context length\b(?: \((?<limitTokens>\d{1,12}) tokens\))?/i,
  },
  {
    family: 'sglang',
    rule: 'requested_token_count_exceeds',
    reason: CONTEXT,
    pattern: /\brequested token count exceeds the model.{1,3}s maximum context length\b/i,
  },
  // Moonshot, MiniMax, Cerebras, GLM-compatible endpoints. Moonshot's "requested" and Cerebras'
  // "current length" may include max_tokens, so neither is taken as the prompt.
  {
    family: 'moonshot',
    rule: 'exceeded_model_token_limit',
    reason: CONTEXT,
    pattern: /\bexceeded model token limit: (?<limitTokens>\d{1,12})/i,
  },
  { family: 'minimax', rule: 'context_window_exceeds_limit', reason: CONTEXT, pattern: /\bcontext window exceeds limit\b/i },
  {
    family: 'cerebras',
    rule: 'current_length_over_limit',
    reason: CONTEXT,
    pattern: /\bcurrent length is \d{1,12} while limit is (?<limitTokens>\d{1,12})/i,
  },
  {
    family: 'glm',
    rule: 'input_tokens_exceed_max_prompt_tokens',
    reason: CONTEXT,
    pattern: /\bnumber of input tokens \((?<promptTokens>\d{1,12})\) has exceeded max_prompt_tokens\b(?: \((?<limitTokens>\d{1,12})\))?/i,
  },
  // Groq, Cerebras and OpenRouter sometimes send only the advice, with no numbers
  {
    family: 'openai',
    rule: 'reduce_length_of_messages',
    reason: CONTEXT,
    pattern: /\bplease reduce the length of (?:the messages|either one)\b/i,
  },
  // old vLLM filled max_tokens = window - prompt, so a negative value means the prompt alone overflowed
  // The room left for the completion: negative, or none at all (a prompt that exactly fills the window).
  { family: 'vllm', rule: 'negative_max_tokens', reason: CONTEXT, pattern: /\bmax_tokens must be at least 1, got (?:-\d|0(?!\d|\.\d))/i },
  // LiteLLM names the class even when the provider text is unfamiliar
  { family: 'litellm', rule: 'litellm_context_window_exceeded', reason: CONTEXT, pattern: /\bContextWindowExceededError\b/ },
  // Body-size rejections: Google front end, AWS API Gateway / Lambda, nginx, Cloudflare, Envoy, fastify, express, Vercel, Anthropic edge
  {
    family: 'http',
    rule: 'request_body_size_exceeded',
    reason: BODY,
    pattern: /\bmaximum request body size (?<limitBytes>\d{1,15}) exceeded\b(?:, actual body size (?<bodyBytes>\d{1,15}))?/i,
  },
  {
    family: 'http',
    rule: 'content_length_exceeded',
    reason: BODY,
    pattern: /\bHTTP content length exceeded (?<limitBytes>\d{1,15}) bytes\b/i,
  },
  { family: 'http', rule: 'request_entity_too_large', reason: BODY, pattern: /\brequest entity too large\b/i },
  { family: 'http', rule: 'payload_too_large', reason: BODY, pattern: /\b(?:function_)?payload[ _]too[ _]large\b/i },
  { family: 'http', rule: 'request_body_too_large', reason: BODY, pattern: /\brequest body is too large\b/i },
  { family: 'anthropic', rule: 'request_exceeds_maximum_size', reason: BODY, pattern: /\brequest exceeds the maximum size\b/i },
  { family: 'http', rule: 'request_too_long', reason: BODY, pattern: /(?:^|\n)request too long\.?(?:\n|$)/i },
];

/** Sentences that state numbers but decide nothing: other clauses of a message a phrase decides, or wordings providers share. */
const NUMBER_PATTERNS: readonly NumberPattern[] = [
  { family: 'openai', pattern: /messages resulted in (?:over )?(?<promptTokens>\d{1,12}) tokens/i },
  { family: 'openai', pattern: /\((?<promptTokens>\d{1,12}) in the messages, (?<completionTokens>\d{1,12}) in the completion\)/i },
  { family: 'openai', pattern: /\((?<promptTokens>\d{1,12}) in your prompt; (?<completionTokens>\d{1,12}) for the completion\)/i },
  { family: 'openai', pattern: /\((?<promptTokens>\d{1,12}) of text input(?:, (?<completionTokens>\d{1,12}) in the output)?\)/i },
  // vLLM >= 0.10; the "characters" variant states no input tokens, only the output request
  {
    family: 'vllm',
    pattern:
      /requested (?<completionTokens>\d{1,12}) output tokens(?: and your prompt contains (?:at least )?(?<promptTokens>\d{1,12}) input tokens)?/i,
  },
  { family: 'vllm', pattern: /your request has (?<promptTokens>\d{1,12}) input tokens/i },
  { family: 'vllm', pattern: /'max_tokens' or 'max_completion_tokens' is too large: (?<completionTokens>\d{1,12})/i },
  // Mistral: "Prompt contains N tokens and 0 draft tokens, too large for model with M maximum context length"
  { family: 'mistral', pattern: /prompt contains (?<promptTokens>\d{1,12}) tokens/i },
  // LM Studio's second sentence: "... the model is loaded with context length of only N tokens"
  { family: 'lmstudio', pattern: /context length of only (?<limitTokens>\d{1,12}) tokens/i },
  // SGLang's requested_token_count_exceeds, and other servers' "exceeds the maximum context length of N tokens"
  { family: 'sglang', pattern: /maximum context length of (?<limitTokens>\d{1,12}) tokens/i },
  {
    family: 'sglang',
    pattern: /(?<promptTokens>\d{1,12}) tokens from the input messages and (?<completionTokens>\d{1,12}) tokens for the completion/i,
  },
];

export const STATEMENTS: readonly NumberPattern[] = [...OVERLONG_PHRASES, ...NUMBER_PATTERNS];

export const RULES: readonly Rule[] = [
  ...OVERLONG_CODES,
  ...BINDING_PHRASES,
  ...OVERLONG_PHRASES,
  ...NOT_OVERLONG_PHRASES,
  ...NUMBER_PATTERNS,
];
