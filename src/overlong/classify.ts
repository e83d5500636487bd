/**
 * Does an upstream rejection mean "this request is too long"? The one place in the
 * gateway that reads provider error text (see test/fixtures/README.md for the decisions).
 *
 * Order of evidence: the body before the status (llama.cpp has answered overflows with
 * 500, aggregators with 200); structured codes before phrases; phrases before numbers;
 * numbers only to overrule an overflow whose requested completion leaves no room for a
 * prompt. Two statuses are decisive on their own: 429 is a rate limit whatever it says,
 * and 413 is a body-size rejection unless its body says it is a per-minute quota.
 */
import { gatherEvidence, MAX_SCAN_CHARS, type Evidence } from './evidence.js';
import { codeWords, decideGeneral, findGeneralVeto, prose, readStatements } from './general.js';
import { completionCrowdsOutPrompt, extractLimits } from './numbers.js';
import { readQuantities } from './quantities.js';
import {
  ALL_RULES,
  BINDING_PHRASES,
  COMPLETION_PATH,
  CONTENT_PATH,
  isEnabled,
  NOT_OVERLONG_CODES,
  NOT_OVERLONG_PHRASES,
  OVERLONG_CODES,
  OVERLONG_PHRASES,
  SCHEMA_PATH,
  SIZE_COMPLAINT,
  type RuleSelection,
  type Signal,
} from './rules.js';
import type { StatedLimits, UpstreamError, Verdict } from './types.js';

export type { OverlongReason, StatedLimits, UpstreamError, Verdict } from './types.js';
export type { RuleSelection } from './rules.js';

/**
 * An error response (status >= 400, or a 200 JSON body that carries an error object).
 * `rules` switches specific rules off to measure the general layer (scripts/lofo.ts); the
 * gateway always runs them all.
 */
export function classifyResponse(error: UpstreamError, rules: RuleSelection = ALL_RULES): Verdict {
  try {
    const status = Number.isInteger(error.status) ? error.status : 0;
    const body = typeof error.body === 'string' ? error.body : '';
    if (status === 429) return notOverlong('status_429');
    const evidence = gatherEvidence(body, status >= 400);
    if (status < 400 && evidence.windowStopBeforeOutput) return windowStop();
    if (status < 400 && !evidence.carriesError) return notOverlong('no_error_object');
    return status === 413 ? decide413(read(evidence), rules) : decide(read(evidence), rules);
  } catch {
    // A classifier bug must never break the relay: the error goes to the client as it came.
    return notOverlong('classifier_failed');
  }
}

/** An answer that stopped for the window before any output: the request did not fit, said as a stop reason. */
function windowStop(): Verdict {
  return { overlong: true, reason: 'context_length', limits: {}, rule: 'window_stop_reason' };
}

// Cheap pre-check for stream chunks: normal deltas contain none of these words.
const ERROR_MARKER = /error|exception|exceed|too long|too large|overflow|failed/i;

/** One server-sent event's `data` payload (or the raw first chunk of a 200 stream). */
export function classifyStreamEvent(data: string, rules: RuleSelection = ALL_RULES): Verdict {
  try {
    if (typeof data !== 'string') return notOverlong('no_error_marker');
    if (!ERROR_MARKER.test(data.slice(0, MAX_SCAN_CHARS))) return notOverlong('no_error_marker');
    const evidence = gatherEvidence(data, false);
    if (evidence.windowStopBeforeOutput) return windowStop();
    if (!evidence.carriesError) return notOverlong('no_error_object');
    return decide(read(evidence), rules);
  } catch {
    return notOverlong('classifier_failed');
  }
}

/** Evidence plus the general layer's reading of it, made once per error. */
interface Reading extends Evidence {
  prose: string;
  codeWords: string;
}

function read(evidence: Evidence): Reading {
  return { ...evidence, prose: prose(evidence.text), codeWords: codeWords(evidence.codes) };
}

/** The verdict on an error that refused bound provider state (see BINDING_PHRASES): the rescue may mend its own rewrite. */
export function isBindingRefusal(verdict: Verdict): boolean {
  return !verdict.overlong && BINDING_RULES.has(verdict.rule);
}

const BINDING_RULES = new Set(BINDING_PHRASES.map((p) => p.rule));

/**
 * A refusal of signed state itself (bound to another prefix, or a signature that does not verify),
 * which removing that state mends; not a refusal of the opt-in or of a missing open-round block.
 */
export function refusesBoundState(verdict: Verdict): boolean {
  return !verdict.overlong && verdict.rule === 'thinking_bound_elsewhere';
}

function decide(r: Reading, rules: RuleSelection): Verdict {
  const binding = findPhrase(BINDING_PHRASES, r.text, rules);
  if (binding !== undefined) return notOverlong(binding);
  const veto = findVeto(r);
  if (veto !== undefined) return notOverlong(veto);
  const numbers = readQuantities(r.prose);
  const specific = findOverlongCode(r, rules) ?? findOverlongPhrase(r.text, rules);
  if (specific !== undefined) return confirm(specific, r, rules, numbers.limits);
  const negative = findPhrase(NOT_OVERLONG_PHRASES, r.text, rules);
  if (negative !== undefined) return notOverlong(negative);
  const general = decideGeneral(readStatements(r.prose, r.codeWords), numbers);
  if (general === undefined) return notOverlong('no_signal');
  if (!general.overlong) return notOverlong(general.rule);
  return confirm({ rule: general.rule, reason: general.reason }, r, rules, numbers.limits);
}

/** Any 413 is a body-size rejection, except a per-minute token quota dressed as one (Groq). */
function decide413(r: Reading, rules: RuleSelection): Verdict {
  const rateLimit = findRateLimit(r);
  if (rateLimit !== undefined) return notOverlong(rateLimit);
  const signal = findOverlongCode(r, rules) ?? findOverlongPhrase(r.text, rules);
  return {
    overlong: true,
    reason: 'body_too_large',
    limits: limitsOf(r, rules, readQuantities(r.prose).limits),
    rule: signal?.rule ?? 'status_413',
  };
}

/** An overflow signal, unless the stated numbers show max_tokens alone fills the window. */
function confirm(signal: Signal, r: Reading, rules: RuleSelection, general: StatedLimits): Verdict {
  const limits = limitsOf(r, rules, general);
  if (signal.reason === 'context_length' && completionCrowdsOutPrompt(limits)) {
    return notOverlong('completion_fills_window');
  }
  return { overlong: true, reason: signal.reason, limits, rule: signal.rule };
}

function findVeto(r: Reading): string | undefined {
  for (const code of r.codes) {
    const rule = NOT_OVERLONG_CODES.get(code);
    if (rule !== undefined) return rule;
  }
  if (stringLimitTarget(r) === 'schema') return 'schema_string_too_long';
  const blamed = blamedField(r);
  // A size rule of one field that is not the conversation: no compaction makes it pass.
  if (blamed !== undefined && blamed !== 'content' && SIZE_COMPLAINT.test(r.prose)) return blamed === 'completion' ? 'completion_value_cap' : 'schema_field_size';
  return findGeneralVeto(r.prose, r.codeWords);
}

/**
 * What the fields an error blames are: the conversation (content), the completion limit, or
 * another field of the request (schema). Content wins: an error that names the conversation
 * is about its size.
 */
function blamedField(r: Reading): 'content' | 'completion' | 'schema' | undefined {
  const paths = r.paths.map((p) => p.trim()).filter((p) => p !== '' && p !== 'null');
  if (paths.length === 0) return undefined;
  if (paths.some((p) => CONTENT_PATH.test(p) && !SCHEMA_PATH.test(p))) return 'content';
  return paths.some((p) => COMPLETION_PATH.test(p)) ? 'completion' : 'schema';
}

/**
 * What a 413 is vetoed by: only a rate limit or a quota, said in its text or its codes' words
 * (`rate_limit_exceeded`, `insufficient_quota`, `RESOURCE_EXHAUSTED`).
 */
function findRateLimit(r: Reading): string | undefined {
  const veto = findGeneralVeto(r.prose, r.codeWords);
  return veto === 'rate_limit' || veto === 'quota' ? veto : undefined;
}

function findOverlongCode(r: Reading, rules: RuleSelection): Signal | undefined {
  for (const code of r.codes) {
    const found = OVERLONG_CODES.get(code);
    if (found !== undefined && isEnabled(found.family, rules)) return { rule: code, reason: found.reason };
  }
  if (stringLimitTarget(r) === 'content') {
    return { rule: 'string_above_max_length', reason: 'context_length' };
  }
  return undefined;
}

/**
 * OpenAI's `string_above_max_length` caps one string: a message's content (compaction
 * shrinks it) or a tool name/description (a schema error). Unknown targets count as schema.
 */
function stringLimitTarget(r: Reading): 'content' | 'schema' | undefined {
  if (!r.codes.includes('string_above_max_length')) return undefined;
  if (r.paths.some((p) => SCHEMA_PATH.test(p))) return 'schema';
  return r.paths.some((p) => CONTENT_PATH.test(p)) ? 'content' : 'schema';
}

function findOverlongPhrase(text: string, rules: RuleSelection): Signal | undefined {
  for (const { family, rule, reason, pattern } of OVERLONG_PHRASES) {
    if (isEnabled(family, rules) && pattern.test(text)) return { rule, reason };
  }
  return undefined;
}

function findPhrase(
  phrases: readonly { family: string; rule: string; pattern: RegExp }[],
  text: string,
  rules: RuleSelection,
): string | undefined {
  return phrases.find(({ family, pattern }) => isEnabled(family, rules) && pattern.test(text))?.rule;
}

/** Specific statements first, then the general reading, then numeric fields; completionCounted last. */
function limitsOf(r: Reading, rules: RuleSelection, general: StatedLimits): StatedLimits {
  const limits = extractLimits(r.text, r.fields, rules);
  for (const key of Object.keys(general) as (keyof StatedLimits)[]) (limits as Record<string, unknown>)[key] ??= general[key];
  if (limits.completionTokens !== undefined || COMPLETION_COUNTED.test(r.prose)) limits.completionCounted = true;
  return limits;
}

// Words that say the provider counted the requested completion in the total it compared.
const COMPLETION_COUNTED =
  /\bprompt and (?:prediction|completion)\b|\binput length and [`'"]?max tokens\b|\binputs?[`'"]? tokens \+ [`'"]?max new tokens\b|\bfor a total of\b/i;

function notOverlong(rule: string): Verdict {
  return { overlong: false, rule };
}
