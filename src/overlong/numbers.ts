/**
 * The numbers an overflow message states, and the one decision they support:
 * whether the requested completion leaves no room for any prompt, in which case
 * compacting the prompt cannot help and lowering max_tokens is the fix.
 */
import { ALL_RULES, isEnabled, type RuleSelection } from './rules.js';
import type { StatedLimits } from './types.js';

type Field = Exclude<keyof StatedLimits, 'completionCounted'>;

interface NumberPattern {
  family: string;
  pattern: RegExp;
  /** The field each capture group fills, in order. */
  fields: readonly Field[];
}

// Every pattern is a literal phrase around bounded digit runs: no nested quantifiers.
export const NUMBER_PATTERNS: readonly NumberPattern[] = [
  // OpenAI, Azure, DeepSeek, vLLM, FastChat, OpenRouter ("This endpoint's ...")
  { family: 'openai', pattern: /maximum context length is (\d{1,12}) tokens/i, fields: ['limitTokens'] },
  { family: 'openai', pattern: /messages resulted in (?:over )?(\d{1,12}) tokens/i, fields: ['promptTokens'] },
  { family: 'openai', pattern: /\((\d{1,12}) in the messages, (\d{1,12}) in the completion\)/i, fields: ['promptTokens', 'completionTokens'] },
  { family: 'openai', pattern: /\((\d{1,12}) in your prompt; (\d{1,12}) for the completion\)/i, fields: ['promptTokens', 'completionTokens'] },
  { family: 'openai', pattern: /\((\d{1,12}) of text input(?:, (\d{1,12}) in the output)?\)/i, fields: ['promptTokens', 'completionTokens'] },
  // vLLM >= 0.10; the "characters" variant states no input tokens, only the output request
  {
    family: 'vllm',
    pattern: /requested (\d{1,12}) output tokens and your prompt contains (?:at least )?(\d{1,12}) input tokens/i,
    fields: ['completionTokens', 'promptTokens'],
  },
  { family: 'vllm', pattern: /requested (\d{1,12}) output tokens/i, fields: ['completionTokens'] },
  { family: 'vllm', pattern: /your request has (\d{1,12}) input tokens/i, fields: ['promptTokens'] },
  { family: 'vllm', pattern: /'max_tokens' or 'max_completion_tokens' is too large: (\d{1,12})/i, fields: ['completionTokens'] },
  // Anthropic (also through Bedrock and OpenRouter)
  { family: 'anthropic', pattern: /prompt is too long: (\d{1,12}) tokens > (\d{1,12}) maximum/i, fields: ['promptTokens', 'limitTokens'] },
  {
    family: 'anthropic',
    pattern: /exceed context limit: (\d{1,12}) \+ (\d{1,12}) > (\d{1,12})/i,
    fields: ['promptTokens', 'completionTokens', 'limitTokens'],
  },
  // Fireworks
  {
    family: 'anthropic',
    pattern: /prompt is too long: (\d{1,12}), model maximum context length: (\d{1,12})/i,
    fields: ['promptTokens', 'limitTokens'],
  },
  // Gemini API and Vertex AI
  {
    family: 'gemini',
    pattern: /input token count \((\d{1,12})\) exceeds the maximum number of tokens allowed \((\d{1,12})\)/i,
    fields: ['promptTokens', 'limitTokens'],
  },
  { family: 'gemini', pattern: /input token count exceeds the maximum number of tokens allowed \(?(\d{1,12})/i, fields: ['limitTokens'] },
  {
    family: 'gemini',
    pattern: /input token count is (\d{1,12}) but model only supports up to (\d{1,12})/i,
    fields: ['promptTokens', 'limitTokens'],
  },
  // Mistral
  { family: 'mistral', pattern: /prompt contains (\d{1,12}) tokens/i, fields: ['promptTokens'] },
  { family: 'mistral', pattern: /too large for model with (\d{1,12}) maximum context length/i, fields: ['limitTokens'] },
  // TGI, Together
  {
    family: 'tgi',
    pattern: /must be <= (\d{1,12})\. Given: (\d{1,12}) `?inputs`? tokens and (\d{1,12}) `?max_new_tokens`?/i,
    fields: ['limitTokens', 'promptTokens', 'completionTokens'],
  },
  // Cohere v1 counts prompt and prediction together, so only the limit is usable
  { family: 'cohere', pattern: /\(prompt and prediction\) cannot exceed (\d{1,12})/i, fields: ['limitTokens'] },
  // DashScope
  { family: 'dashscope', pattern: /range of input length should be \[\d{1,12}, ?(\d{1,12})\]/i, fields: ['limitTokens'] },
  // llama.cpp (older builds state the numbers only as JSON fields, see evidence.ts)
  {
    family: 'llamacpp',
    pattern: /request \((\d{1,12}) tokens\) exceeds the available context size \((\d{1,12}) tokens\)/i,
    fields: ['promptTokens', 'limitTokens'],
  },
  // LM Studio
  { family: 'lmstudio', pattern: /n_keep: (\d{1,12}) ?>= ?n_ctx: (\d{1,12})/i, fields: ['promptTokens', 'limitTokens'] },
  { family: 'lmstudio', pattern: /trying to keep the first (\d{1,12}) tokens/i, fields: ['promptTokens'] },
  { family: 'lmstudio', pattern: /context length of only (\d{1,12}) tokens/i, fields: ['limitTokens'] },
  // xAI
  {
    family: 'xai',
    pattern: /maximum prompt length is (\d{1,12}) but the request contains (\d{1,12}) tokens/i,
    fields: ['limitTokens', 'promptTokens'],
  },
  {
    family: 'xai',
    pattern: /current message \((\d{1,12}) tokens\) exceeds budget \((\d{1,12}) tokens\)/i,
    fields: ['promptTokens', 'limitTokens'],
  },
  // SGLang
  {
    family: 'sglang',
    pattern: /the input \((\d{1,12}) tokens\) is longer than the model.{1,3}s context length \((\d{1,12}) tokens\)/i,
    fields: ['promptTokens', 'limitTokens'],
  },
  { family: 'sglang', pattern: /maximum context length of (\d{1,12}) tokens/i, fields: ['limitTokens'] },
  {
    family: 'sglang',
    pattern: /(\d{1,12}) tokens from the input messages and (\d{1,12}) tokens for the completion/i,
    fields: ['promptTokens', 'completionTokens'],
  },
  // OpenAI / Azure (gpt-5 input cap)
  { family: 'openai', pattern: /configured limit of (\d{1,12}) tokens/i, fields: ['limitTokens'] },
  // OpenAI embeddings
  { family: 'openai', pattern: /requested (\d{1,12}) tokens, max (\d{1,12}) tokens per request/i, fields: ['promptTokens', 'limitTokens'] },
  // Moonshot ("requested" there may include max_tokens, so it is not taken as the prompt)
  { family: 'moonshot', pattern: /exceeded model token limit: (\d{1,12})/i, fields: ['limitTokens'] },
  // Cerebras ("current length" may include max_tokens, likewise)
  { family: 'cerebras', pattern: /current length is \d{1,12} while limit is (\d{1,12})/i, fields: ['limitTokens'] },
  // GLM-compatible endpoint
  {
    family: 'glm',
    pattern: /number of input tokens \((\d{1,12})\) has exceeded max_prompt_tokens \((\d{1,12})\)/i,
    fields: ['promptTokens', 'limitTokens'],
  },
  // Body-size limits (Google front end, AWS API Gateway)
  {
    family: 'http',
    pattern: /maximum request body size (\d{1,15}) exceeded, actual body size (\d{1,15})/i,
    fields: ['limitBytes', 'bodyBytes'],
  },
  { family: 'http', pattern: /content length exceeded (\d{1,15}) bytes/i, fields: ['limitBytes'] },
];

/**
 * The numbers stated in `text` by the enabled families' wordings, the first statement of
 * each winning; `fields` (numbers sent as JSON fields) fill the gaps.
 */
export function extractLimits(text: string, fields: StatedLimits, rules: RuleSelection = ALL_RULES): StatedLimits {
  const limits: StatedLimits = {};
  for (const { family, pattern, fields: names } of NUMBER_PATTERNS) {
    if (!isEnabled(family, rules)) continue;
    const m = pattern.exec(text);
    if (m === null) continue;
    names.forEach((name, i) => {
      // an optional group that did not take part is undefined; at most 15 digits are always exact
      const digits = m[i + 1];
      if (digits !== undefined) limits[name] ??= Number(digits);
    });
  }
  for (const key of Object.keys(fields) as Field[]) limits[key] ??= fields[key];
  return limits;
}

/**
 * Below this many tokens of room, no compacted conversation (system prompt, a summary,
 * the last user turn) fits next to the requested completion. Scaled down for tiny windows.
 */
export const MIN_PROMPT_ROOM_TOKENS = 256;

/**
 * True when max_tokens alone (nearly) fills the window: the overflow is cured by
 * lowering max_tokens, never by compacting the prompt. Input + max_tokens overflows
 * where real room remains for the prompt stay overlong (both fixes work).
 */
export function completionCrowdsOutPrompt(limits: StatedLimits): boolean {
  // No stated completion leaves the whole window, which is never below minRoom.
  const { limitTokens: limit = 0, completionTokens: completion = 0 } = limits;
  if (limit <= 0) return false;
  const minRoom = Math.max(1, Math.min(MIN_PROMPT_ROOM_TOKENS, Math.floor(limit / 16)));
  return limit - completion < minRoom;
}
