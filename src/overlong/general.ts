/**
 * Reads what an error says, not how one provider says it: a relation (exceeds, is too long, must be <=...) whose subject is the
 * input (an overflow), the output (max_tokens: lowering it is the fix) or an attachment (its own limit). Stated numbers decide when
 * words do not (quantities.ts); vetoes (rate limits, quotas, billing, auth, filters, unknown models, schema, overload, timeouts) first.
 */
import type { OverlongReason } from './types.js';
import type { Quantities } from './quantities.js';

/** Characters of message text the general layer reads: errors say what they are early. */
export const MAX_GENERAL_CHARS = 16 * 1024;
const MAX_RELATIONS = 32;
const SUBJECT_CHARS = 80;
const OBJECT_CHARS = 80;

interface Veto {
  rule: string;
  pattern: RegExp;
}

const VETOES: readonly Veto[] = [
  {
    rule: 'rate_limit',
    pattern:
      /\brate[ _-]?limit|\bthrottl|\btoo many requests\b|\brequest rate\b|\bper[ -](?:minute|min|hour|day|second)\b|\btokens per (?:min|minute|hour|day)\b|\b(?:TPM|RPM|TPD|RPD|ITPM|OTPM)\b|\bplease wait\b|\bretry[ -]?after\b|\b(?:try|retry) again (?:later|in \d|after|shortly|soon)\b|\bslow down\b|\bresource[ _]exhausted\b/i,
  },
  { rule: 'quota', pattern: /\bquota\b/i },
  {
    rule: 'billing',
    pattern:
      /\bbilling\b|\bsubscription\b|\bpayment\b|\bcredits?\b|\bcredit balance\b|\binsufficient (?:balance|funds)\b|\bextra usage\b|\b(?:monthly|daily|weekly|spend(?:ing)?|usage) limit\b|\bupgrade (?:your|to)\b|\byour (?:current )?plan\b|\bnot (?:yet )?available (?:for|on|in) (?:this|your) (?:subscription|plan|account|organi[sz]ation|tier|region)\b/i,
  },
  {
    rule: 'auth',
    pattern:
      /\b(?:invalid|incorrect|missing|expired|revoked|no)[ _](?:x-)?api[ _-]?key\b|\bauthenticat|\bunauthori[sz]ed\b|\bpermission[ _]denied\b|\baccess denied\b|\bnot authori[sz]ed\b/i,
  },
  {
    rule: 'content_filter',
    pattern:
      /\bcontent[ _-]?(?:filter|policy|management|moderation)|\bsafety (?:system|filter|settings|policy)\b|\bflagged\b|\bresponsible ai\b|\bprohibited\b/i,
  },
  {
    rule: 'model_not_found',
    // "model_not_found" reads as "model not found" (prose and code words turn `_` into spaces).
    pattern:
      /\bno such model\b|\bunknown model\b|\bmodel\b[^.\n]{0,80}?\b(?:does not exist|not found|is not supported|is not available)\b/i,
  },
  {
    rule: 'schema',
    pattern:
      /\b(?:extra|unknown|unrecognized|unexpected|additional|unsupported) (?:inputs?|fields?|keys?|properties|property|parameters?|arguments?)\b|\bextra[ _]forbidden\b|\bnot permitted\b|\binvalid type\b|\b(?:invalid|unsupported|invalid enum) value\b|\bliteral error\b|\bsupported values are\b|\bis not one of\b|\binput should be ['"`]|\bshould be a valid\b|\bexpected (?:a|an) (?:string|object|array|integer|number|boolean|list)\b(?! with)|\bmissing required\b|\bis a required property\b|\bfield required\b|\bmust be (?:a|an) (?:string|object|array|integer|number|boolean)\b/i,
  },
  { rule: 'overloaded', pattern: /\boverloaded\b|\bat capacity\b|\btemporarily unavailable\b/i },
  // A cap on requests in flight (a count of them, "(5/5)"), or no replica to serve: waiting helps, compacting does not.
  {
    rule: 'capacity',
    pattern:
      /\brequest limit reached\b|\bconcurren(?:t|cy)\b[^.\n]{0,40}\blimit\b|\bresource ?exhausted\b|\bprovider unavailable\b|\bno (?:available )?capacity\b|\bcapacity (?:is )?unavailable\b/i,
  },
  // Go's "context deadline exceeded" reads like "context ... exceeded": it is a timeout.
  { rule: 'timeout', pattern: /\bdeadline exceeded\b|\bcontext canceled\b|\btimed out\b|\btimeout\b/i },
];

export function findGeneralVeto(text: string, codeWords: string): string | undefined {
  for (const { rule, pattern } of VETOES) {
    if (pattern.test(text) || pattern.test(codeWords)) return rule;
  }
  return undefined;
}

// Relations that need no limit named after them ("prompt is too long", "context size has been exceeded").
const STRONG = String.raw`too (?:long|large|big)(?!\s+ago\b)|too many(?: tokens)?|overflow(?:s|ed|ing)?|exceeded(?!\s+(?:the|your|its|a|an|model|max|maximum|limit)\b)|must (?:be )?(?:less|fewer|smaller|shorter|lower) than|must be (?:<=?|at most|no (?:more|greater|longer) than)|must not exceed|cannot exceed|can ?not exceed|can't exceed|should be \[`;
// Relations that count only with a limit after them ("exceeds the context window", "> 200000 maximum").
const WEAK = String.raw`exceed(?:s|ed|ing)?|(?:longer|larger|greater|bigger|more) than|above|over the|outside (?:of )?the (?:allowed |valid )?range|>=?`;
// A strong relation ends at a word boundary, or on its own symbol ("must be <= 2048": no word
// character follows the `=`, so `\b` alone would never end it there).
const RELATION = new RegExp(String.raw`(?:\b(?:${STRONG})(?:\b|(?<=[<=]))|\b(?:${WEAK})(?=\W)|\s>=?\s)`, 'gi');
const STRONG_START = new RegExp(String.raw`^\s*(?:${STRONG})`, 'i');
const LIMIT_WORD =
  /\b(?:limit|maximum|max|context|window|capacity|budget|allowed|length|size|range|bound|n ctx|max model len|model|supported)\b|\d/i;

type Kind = 'input' | 'weakInput' | 'output' | 'attachment' | 'field';

// Nouns a subject is made of; the closest one to the relation says what is too big.
const TERMS: readonly [Kind, RegExp][] = [
  [
    'output',
    /\b(?:max[ _](?:new[ _]|output[ _]|completion[ _])?tokens(?:[ _]to[ _]sample)?|maxoutputtokens|maxtokens|num[ _]predict|completions?|outputs?|prediction|generation|maximum tokens you requested)\b/gi,
  ],
  ['attachment', /\b(?:images?|pdfs?|files?|audio|video|attachments?|documents?|pixels|dimensions)\b/gi],
  ['input', /\b(?:prompts?|input[ _]ids|inputs?|context|requests?|messages?|conversation|history|payload|body|entity|query|queries)\b/gi],
  // One field's value: a tool's or a parameter's name, an id, a key. Its size is a schema rule.
  [
    'field',
    /\b(?:(?:tool|function|parameter|property|field|key|server|schema) ?names?(?:\(s\))?|names?(?:\(s\))?|ids?|identifiers?|keys?|descriptions?)\b/gi,
  ],
  ['weakInput', /\b(?:tokens?|token count|characters?|length|size|text|sequence|content|string)\b/gi],
];
// A completion limit the server derived from the window left over, and found nothing left
// ("max_tokens must be at least 1, got -186"): whatever the client asked, the prompt is too long.
const NO_ROOM =
  /\bmax(?:imum)? (?:new |completion |output )?tokens\b[^.\n]{0,40}\bmust be (?:at least 1|>= ?1|greater than 0|positive)\b[^.\n]{0,20}\bgot (?:-\d|0(?!\d|\.\d))/i;
const BOTH_JOINED = /\b(?:and|\+|&)\b|\s\+\s/;
const BODY_WORDS = /\b(?:body|payload|entity|bytes?|[kmg]i?b)\b/i;
const CONTEXT_WORDS = /\b(?:tokens?|context|prompts?|inputs?|messages?)\b/i;
const ADVICE =
  /\b(?:reduce|shorten|decrease|trim|truncate)\b[^.\n]{0,40}?\b(?:prompts?|inputs?|messages|conversation|context|history)\b|\b(?:shorter|smaller) (?:prompts?|inputs?|messages|conversation|context)\b|\bfewer inputs\b|\bincreas\w* the context\b|\bmiddle-out\b|\bprompt[ _]truncation\b/i;

export interface Statements {
  /** The input over a limit, said with a strong subject (prompt, context, request, ...). */
  input?: OverlongReason;
  weakInput?: OverlongReason;
  output: boolean;
  attachment: boolean;
  /** A field's value (a name, an id) over its size rule. */
  field: boolean;
  /** The room the window leaves for the completion is none or negative: the prompt fills it. */
  noRoom: boolean;
  advice: boolean;
}

/** What the text says is too big. `text` is already bounded and normalised (see prose()). */
export function readStatements(text: string, codeWords: string): Statements {
  const found: Statements = { output: false, attachment: false, field: false, noRoom: NO_ROOM.test(text), advice: ADVICE.test(text) };
  readRelations(text, found);
  readRelations(codeWords, found);
  return found;
}

function readRelations(text: string, found: Statements): void {
  RELATION.lastIndex = 0;
  let seen = 0;
  for (let m = RELATION.exec(text); m !== null && seen < MAX_RELATIONS; m = RELATION.exec(text)) {
    seen++;
    const subject = text.slice(Math.max(0, m.index - SUBJECT_CHARS), m.index);
    const object = text.slice(m.index + m[0].length, m.index + m[0].length + OBJECT_CHARS);
    if (!STRONG_START.test(m[0]) && !LIMIT_WORD.test(object)) continue;
    const kind = subjectKind(sentenceTail(subject));
    if (kind === undefined) continue;
    const reason: OverlongReason =
      BODY_WORDS.test(subject + object) && !CONTEXT_WORDS.test(subject + object) ? 'body_too_large' : 'context_length';
    if (kind === 'output') found.output = true;
    else if (kind === 'attachment') found.attachment = true;
    else if (kind === 'field') found.field = true;
    else if (kind === 'input') found.input ??= reason;
    else found.weakInput ??= reason;
  }
}

// Where a subject stops: the previous sentence, or a JSON string boundary (a message kept
// with its raw envelope, `{"error":{"message":"too many tokens...`, must not read its keys).
const SUBJECT_STOPS = ['. ', '\n', '; ', '。', '"', '{', '}'];

function sentenceTail(s: string): string {
  let cut = -1;
  for (const stop of SUBJECT_STOPS) cut = Math.max(cut, s.lastIndexOf(stop));
  return s.slice(cut + 1); // no stop: cut is -1, the whole of s
}

/** "input and max_tokens" name both: the input counted with the completion, an input kind. A weak noun takes the nearest strong one's. */
function subjectKind(subject: string): Kind | undefined {
  let best: Kind | undefined;
  // Every term ends after position 0, so the first one found beats 0.
  let bestAt = 0;
  let strong: Kind | undefined;
  let strongAt = 0;
  const kinds = new Set<Kind>();
  for (const [kind, pattern] of TERMS) {
    pattern.lastIndex = 0;
    for (let m = pattern.exec(subject); m !== null; m = pattern.exec(subject)) {
      kinds.add(kind);
      const at = m.index + m[0].length;
      if (at > bestAt) [best, bestAt] = [kind, at];
      if (kind !== 'weakInput' && at > strongAt) [strong, strongAt] = [kind, at];
    }
  }
  if (best === 'output' && kinds.has('input') && BOTH_JOINED.test(subject)) return 'input';
  // "output tokens", "prompt contains N characters": a weak noun takes the kind of the strong one nearest it.
  // When the closest noun is a strong one, it is also the closest strong one: strong === best.
  return strong ?? best;
}

export type GeneralDecision = { overlong: true; rule: string; reason: OverlongReason } | { overlong: false; rule: string };

/** Strong words; the input's numbers; output or attachment too big; a stated total, weak words, a byte limit, "exceeded by N", advice. */
export function decideGeneral(said: Statements, numbers: Quantities): GeneralDecision | undefined {
  if (said.input !== undefined) return overflow('general_input_over_limit', said.input);
  // A name or an id over its length is what was measured, whatever the numbers beside it.
  if (said.field) return { overlong: false, rule: 'field_size' };
  if (said.noRoom) return overflow('general_no_room_for_output', 'context_length');
  if (numbers.promptOverLimit) return overflow('general_stated_numbers', 'context_length');
  if (said.output) return { overlong: false, rule: 'output_token_cap' };
  if (said.attachment) return { overlong: false, rule: 'attachment_limit' };
  if (numbers.totalOverLimit) return overflow('general_stated_numbers', 'context_length');
  if (said.weakInput !== undefined) return overflow('general_input_over_limit', said.weakInput);
  if (numbers.bodyOverLimit) return overflow('general_stated_numbers', 'body_too_large');
  if (numbers.excess !== undefined) return overflow('general_exceeded_by', 'context_length');
  if (said.advice) return overflow('general_shorten_advice', 'context_length');
  return undefined;
}

function overflow(rule: string, reason: OverlongReason): GeneralDecision {
  return { overlong: true, rule, reason };
}

// HTML pages and code words read as prose: tags become line breaks, snake_case becomes words.
const TAG = /<[^<>]{0,200}>/g;
const ENTITIES: Readonly<Record<string, string>> = {
  '&amp;': '&',
  '&lt;': '<',
  '&gt;': '>',
  '&quot;': '"',
  '&#39;': "'",
  '&#x27;': "'",
  '&nbsp;': ' ',
};
const ENTITY = /&(?:amp|lt|gt|quot|nbsp|#39|#x27);/g;

/** Message text as the general layer reads it: bounded, tags out, entities decoded, `_` as spaces. */
export function prose(text: string): string {
  return text
    .slice(0, MAX_GENERAL_CHARS)
    .replace(TAG, '\n')
    .replace(ENTITY, (e) => ENTITIES[e] ?? e)
    .replaceAll('_', ' ');
}

/** Error codes as words ("context_length_exceeded" -> "context length exceeded"), one per line. */
export function codeWords(codes: readonly string[]): string {
  return codes
    .slice(0, 32)
    .join('\n')
    .replace(/[_.-]+/g, ' ');
}
