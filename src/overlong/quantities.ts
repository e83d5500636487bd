/** A role and unit per number from the words around it; "A + B > C", "B > C - A": input + completion vs window. rules.ts's win. */
import type { StatedLimits } from './types.js';

export interface Quantities {
  limits: StatedLimits;
  /** A stated total ("you requested N tokens") that may include the completion. */
  totalTokens?: number;
  /** The input (or the input plus the completion) over the limit, in one unit. */
  promptOverLimit: boolean;
  /** A stated total over the limit: the input's, unless the error is about the output. */
  totalOverLimit: boolean;
  /** The same, for a body against a byte limit. */
  bodyOverLimit: boolean;
  /** "exceeded by N tokens": how far over, when that is all that is stated. */
  excess?: number;
}

type Role = 'limit' | 'prompt' | 'completion' | 'total' | 'outputCap';
type Unit = 'tokens' | 'chars' | 'bytes' | 'unknown';

/** Numbers looked at per text (with a role or not): real errors state fewer than ten. */
const MAX_NUMBERS = 48;
const BEFORE_CHARS = 64;
const AFTER_CHARS = 48;

// A count: not part of an identifier (gpt-4, claude-3.5, messages[3], req_011, v1/) and not "<400>".
const NUMBER = /(?<![\w.\-[/$#<])(\d{1,3}(?:,\d{3})+(?!\d)|\d{1,15})(?![\w\]]|[.,]\d|>(?!=))/g;
// Where a statement ends: the words around a number never reach across it.
const CLAUSE_END = /[.!?;。\n](?:\s|$)|\n/g;

const AFTER_ROLE: readonly [Role, RegExp][] = [
  ['outputCap', /^[^\d\n]{0,24}\b(?:maximum|max|at most|limit)\b[^\d\n]{0,24}\b(?:output|completion)s? tokens\b/i],
  [
    'completion',
    /^\s*[`'"]?(?:max[ _]new[ _]tokens|max[ _]tokens)\b|^\s*(?:output|completion|new|generated) tokens?\b|^\s*(?:tokens? )?(?:in|for) (?:the )?(?:completion|output|response)\b/i,
  ],
  [
    'prompt',
    /^\s*[`'"]?(?:inputs?|prompt)[`'"]? tokens?\b|^\s*(?:tokens? )?(?:in|from) (?:the |your )?(?:input )?(?:messages?|prompt|input|conversation)\b|^\s*of (?:text|tool) input\b/i,
  ],
  ['limit', /^\s*(?:tokens? )?(?:maximum|max|limit)\b|^\s*tokens? (?:allowed|at most)\b|^[\s-]?tokens?[ -](?:context|window|limit)\b/i],
];

const BEFORE_ROLE: readonly [Role, RegExp][] = [
  [
    'completion',
    /\b(?:max[ _]tokens|max[ _]new[ _]tokens|max[ _]output[ _]tokens|maxoutputtokens|max[ _]completion[ _]tokens|num[ _]predict)[`'"]?\s*(?:[:=(]|is too large:?|of)?\s*[`'"]?$/i,
  ],
  [
    'limit',
    /\b(?:maximum|max|limits?|window|context (?:length|size|window)|budget|allowed|capacity|up to|at most|no more than|less than|fewer than|cannot exceed|n[ _]ctx|upper bound)\b[^\d\n]{0,32}?(?:\s(?:is|of|at|be)|[:=(]|\s)\s*[`'"]?$|\s<=?\s*[`'"]?$/i,
  ],
  [
    'total',
    /\b(?:requested(?: tokens)?|total(?: length)?|a total of|received|got|given:?|current length is|resulted in(?: over)?)\s*(?:about |at least |up to |over )?[:(]?\s*$/i,
  ],
  [
    'prompt',
    /(?<!\b(?:maximum|max|allowed|limit)(?: \w+){0,2} )\b(?:prompt|input|inputs|messages?|request|conversation|query|text|sequence|n[ _]keep|body|payload)\b[^\d\n]{0,40}?(?:[\s(](?:contains|has|have|is|are|count|length|size|tokens|of)|[:=(])\s*(?:at least |about |over )?[`'"]?$/i,
  ],
];

// "180000 + 64000 > 200000": input + completion against the window (Anthropic, TGI in prose).
const SUM_OVER = /(?<![\d.])(\d{1,12}) ?\+ ?(\d{1,12}) ?>=? ?(\d{1,12})(?![\d.])/;
// "(2000 > 4096 - 3000)": the completion against the room the input leaves (vLLM).
const ROOM_OVER = /(?<![\d.])(\d{1,12}) ?>=? ?(\d{1,12}) ?- ?(\d{1,12})(?![\d.])/;
const EXCEEDED_BY = /\bexceed(?:s|ed)?\b[^.\n]{0,40}?\bby (\d{1,12}) tokens?\b/i;

const TOKEN_WORD = /\btokens?\b/i;
const CHAR_WORD = /\b(?:characters?|chars)\b/i;
const BYTE_NEAR = /^\s*(?:bytes?|([kmg])(i?)b)\b/i;
const BYTE_CONTEXT = /\b(?:bytes?|body|payload|content[ -]length|entity)\b/i;

interface Stated {
  value: number;
  role: Role;
  unit: Unit;
}

export function readQuantities(text: string): Quantities {
  const found: Stated[] = [];
  const ends = clauseEnds(text);
  NUMBER.lastIndex = 0;
  let seen = 0;
  for (let m = NUMBER.exec(text); m !== null && seen++ < MAX_NUMBERS; m = NUMBER.exec(text)) {
    const value = toCount(m[1]);
    if (value === undefined) continue;
    const start = m.index;
    const end = start + m[0].length;
    const [from, to] = clauseAround(ends, start, text.length);
    const before = text.slice(Math.max(from, start - BEFORE_CHARS), start);
    const after = text.slice(end, Math.min(to, end + AFTER_CHARS));
    const role = roleOf(before, after);
    const unit = unitOf(before, after);
    // "exceeds limit (2013)": a bare number in parentheses, with no unit anywhere near, is a code.
    if (role !== undefined && !(unit === 'unknown' && before.endsWith('('))) found.push({ value: value * byteScale(after), role, unit });
  }
  return assemble(text, found);
}

function assemble(text: string, found: readonly Stated[]): Quantities {
  const limits: StatedLimits = {};
  let totalTokens: number | undefined;
  let limitChars: number | undefined;
  let promptChars: number | undefined;
  const sum = SUM_OVER.exec(text) ?? undefined;
  if (sum !== undefined) {
    limits.promptTokens = toCount(sum[1]);
    limits.completionTokens = toCount(sum[2]);
    limits.limitTokens = toCount(sum[3]);
  }
  const room = ROOM_OVER.exec(text) ?? undefined;
  if (room !== undefined && sum === undefined) {
    limits.completionTokens = toCount(room[1]);
    limits.limitTokens = toCount(room[2]);
    limits.promptTokens = toCount(room[3]);
  }
  for (const { value, role, unit } of found) {
    if (unit === 'bytes') {
      if (role === 'limit') limits.limitBytes ??= value;
      else if (role === 'prompt' || role === 'total') limits.bodyBytes ??= value;
    } else if (unit === 'chars') {
      if (role === 'limit') limitChars ??= value;
      else if (role === 'prompt' || role === 'total') promptChars ??= value;
    } else if (role === 'limit') limits.limitTokens ??= value;
    else if (role === 'prompt') limits.promptTokens ??= value;
    else if (role === 'completion') limits.completionTokens ??= value;
    else if (role === 'total') totalTokens ??= value;
  }
  const excess = toCount(EXCEEDED_BY.exec(text)?.[1]);
  return {
    limits,
    totalTokens,
    promptOverLimit: promptOver(limits) || over(promptChars, limitChars),
    totalOverLimit: over(totalTokens, limits.limitTokens),
    bodyOverLimit: over(limits.bodyBytes, limits.limitBytes),
    excess,
  };
}

function promptOver(limits: StatedLimits): boolean {
  const { limitTokens: limit, promptTokens: prompt = NaN, completionTokens: completion = NaN } = limits;
  return over(prompt, limit) || over(prompt + completion, limit);
}

/** A number missing on either side is never over (NaN compares false). */
function over(value: number | undefined, limit: number | undefined): boolean {
  return (value ?? NaN) > (limit ?? NaN);
}

// "must be at least 1", "exceeded by 1502 tokens": a floor or an excess, never a limit or a size.
const NOT_A_SIZE = /\b(?:at least|minimum|min|no less than)\s*[`'"]?$|\bexceed\w*\b[^\d\n]{0,40}?\bby\s*$/i;

/** The words right after a number say most; else the cue before it that starts closest to it. */
function roleOf(before: string, after: string): Role | undefined {
  if (NOT_A_SIZE.test(before)) return undefined;
  for (const [role, pattern] of AFTER_ROLE) if (pattern.test(after)) return role;
  let best: Role | undefined;
  let bestAt = -1;
  for (const [role, pattern] of BEFORE_ROLE) {
    const at = pattern.exec(before)?.index ?? -1;
    if (at > bestAt) {
      best = role;
      bestAt = at;
    }
  }
  return best;
}

/** "10 MB" is 10,000,000 bytes, "1 MiB" 1,048,576: a size in K, M or G (decimal unless binary), else 1. */
function byteScale(after: string): number {
  const m = BYTE_NEAR.exec(after);
  if (m?.[1] === undefined) return 1;
  return (m[2] === '' ? 1000 : 1024) ** ('kmg'.indexOf(m[1].toLowerCase()) + 1);
}

function unitOf(before: string, after: string): Unit {
  if (BYTE_NEAR.test(after)) return 'bytes';
  const head = after.slice(0, 24);
  if (TOKEN_WORD.test(head)) return 'tokens';
  if (CHAR_WORD.test(head)) return 'chars';
  if (BYTE_CONTEXT.test(before) || BYTE_CONTEXT.test(head)) return 'bytes';
  if (CHAR_WORD.test(before.slice(-24))) return 'chars';
  return TOKEN_WORD.test(before) || TOKEN_WORD.test(after) ? 'tokens' : 'unknown';
}

function clauseEnds(text: string): number[] {
  const ends: number[] = [];
  CLAUSE_END.lastIndex = 0;
  for (let m = CLAUSE_END.exec(text); m !== null && ends.length < 4 * MAX_NUMBERS; m = CLAUSE_END.exec(text)) {
    ends.push(m.index + 1);
  }
  return ends;
}

function clauseAround(ends: readonly number[], at: number, length: number): [number, number] {
  let from = 0;
  let to = length;
  for (const e of ends) {
    if (e <= at) from = e;
    else {
      to = e;
      break;
    }
  }
  return [from, to];
}

function toCount(digits: string | undefined): number | undefined {
  if (digits === undefined) return undefined;
  const n = Number(digits.replaceAll(',', ''));
  return Number.isSafeInteger(n) ? n : undefined;
}
