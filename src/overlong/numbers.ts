/**
 * The numbers an overflow message states (through the named groups of the rules in rules.ts),
 * and the one decision they support:
 * whether the requested completion leaves no room for any prompt, in which case
 * compacting the prompt cannot help and lowering max_tokens is the fix.
 */
import type { StatedLimits } from './types.js';

type Field = Exclude<keyof StatedLimits, 'completionCounted'>;

/** The named groups a rule's pattern may hold (rules.ts), each filling the field of its name. */
export const NUMBER_GROUPS: readonly Field[] = ['limitTokens', 'promptTokens', 'completionTokens', 'limitBytes', 'bodyBytes'];

function isNumberGroup(name: string): name is Field {
  return (NUMBER_GROUPS as readonly string[]).includes(name);
}

/**
 * A reader of the numbers `patterns` state in a text through their named groups, the first
 * statement of each number winning; `fields` (numbers sent as JSON fields) fill the gaps.
 */
export function limitReader(patterns: readonly { pattern: RegExp }[]): (text: string, fields: StatedLimits) => StatedLimits {
  return (text, fields) => {
    const limits: StatedLimits = {};
    for (const { pattern } of patterns) {
      // In the order the sentence states them. A group that did not take part is undefined;
      // at most 15 digits are always exact.
      for (const [name, digits] of Object.entries(pattern.exec(text)?.groups ?? {})) {
        if (digits !== undefined && isNumberGroup(name)) limits[name] ??= Number(digits);
      }
    }
    for (const key of Object.keys(fields) as Field[]) limits[key] ??= fields[key];
    return limits;
  };
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
