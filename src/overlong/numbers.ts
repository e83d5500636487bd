/** Whether the requested completion leaves no room for any prompt: then lowering max_tokens is the fix, not compacting. */
import type { StatedLimits } from './types.js';

type Field = Exclude<keyof StatedLimits, 'completionCounted'>;

export const NUMBER_GROUPS: readonly Field[] = ['limitTokens', 'promptTokens', 'completionTokens', 'limitBytes', 'bodyBytes'];

function isNumberGroup(name: string): name is Field {
  return (NUMBER_GROUPS as readonly string[]).includes(name);
}

/** The first statement of each number wins; `fields` (numbers sent as JSON fields) fill the gaps. */
export function limitReader(patterns: readonly { pattern: RegExp }[]): (text: string, fields: StatedLimits) => StatedLimits {
  return (text, fields) => {
    const limits: StatedLimits = {};
    for (const { pattern } of patterns) {
      // In the order the sentence states them; a group that did not take part is undefined; 15 digits are always exact.
      for (const [name, digits] of Object.entries(pattern.exec(text)?.groups ?? {})) {
        if (digits !== undefined && isNumberGroup(name)) limits[name] ??= Number(digits);
      }
    }
    for (const key of Object.keys(fields) as Field[]) limits[key] ??= fields[key];
    return limits;
  };
}

/** Below this room no compacted conversation (system prompt, summary, last turn) fits beside the completion; scaled for tiny windows. */
export const MIN_PROMPT_ROOM_TOKENS = 256;

/** Input + max_tokens overflows where real room remains for the prompt stay overlong (both fixes work). */
export function completionCrowdsOutPrompt(limits: StatedLimits): boolean {
  // No stated completion leaves the whole window, which is never below minRoom.
  const { limitTokens: limit = 0, completionTokens: completion = 0 } = limits;
  if (limit <= 0) return false;
  const minRoom = Math.max(1, Math.min(MIN_PROMPT_ROOM_TOKENS, Math.floor(limit / 16)));
  return limit - completion < minRoom;
}
