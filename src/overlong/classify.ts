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
import { completionCrowdsOutPrompt, extractLimits } from './numbers.js';
import {
  CONTENT_PATH,
  NOT_OVERLONG_CODES,
  NOT_OVERLONG_PHRASES,
  OVERLONG_CODES,
  OVERLONG_PHRASES,
  RATE_LIMIT_PHRASES,
  SCHEMA_PATH,
  type Signal,
} from './rules.js';
import type { StatedLimits, UpstreamError, Verdict } from './types.js';

export type { OverlongReason, StatedLimits, UpstreamError, Verdict } from './types.js';

/** An error response (status >= 400, or a 200 JSON body that carries an error object). */
export function classifyResponse(error: UpstreamError): Verdict {
  try {
    const status = Number.isInteger(error.status) ? error.status : 0;
    const body = typeof error.body === 'string' ? error.body : '';
    if (status === 429) return notOverlong('status_429');
    const evidence = gatherEvidence(body, status >= 400);
    if (status < 400 && !evidence.carriesError) return notOverlong('no_error_object');
    return status === 413 ? decide413(evidence) : decide(evidence);
  } catch {
    // A classifier bug must never break the relay: the error goes to the client as it came.
    return notOverlong('classifier_failed');
  }
}

// Cheap pre-check for stream chunks: normal deltas contain none of these words.
const ERROR_MARKER = /error|exception|exceed|too long|too large|overflow/i;

/** One server-sent event's `data` payload (or the raw first chunk of a 200 stream). */
export function classifyStreamEvent(data: string): Verdict {
  try {
    if (typeof data !== 'string') return notOverlong('no_error_marker');
    const head = data.length > MAX_SCAN_CHARS ? data.slice(0, MAX_SCAN_CHARS) : data;
    if (!ERROR_MARKER.test(head)) return notOverlong('no_error_marker');
    const evidence = gatherEvidence(data, false);
    if (!evidence.carriesError) return notOverlong('no_error_object');
    return decide(evidence);
  } catch {
    return notOverlong('classifier_failed');
  }
}

function decide(evidence: Evidence): Verdict {
  const veto = findVeto(evidence);
  if (veto !== undefined) return notOverlong(veto);
  const signal = findOverlongCode(evidence) ?? findOverlongPhrase(evidence.text);
  if (signal !== undefined) return confirm(signal, evidence);
  const negative = findPhrase(NOT_OVERLONG_PHRASES, evidence.text);
  return notOverlong(negative ?? 'no_signal');
}

/** Any 413 is a body-size rejection, except a per-minute token quota dressed as one (Groq). */
function decide413(evidence: Evidence): Verdict {
  const rateLimit = findRateLimit(evidence);
  if (rateLimit !== undefined) return notOverlong(rateLimit);
  const signal = findOverlongCode(evidence) ?? findOverlongPhrase(evidence.text);
  return {
    overlong: true,
    reason: 'body_too_large',
    limits: limitsOf(evidence),
    rule: signal?.rule ?? 'status_413',
  };
}

/** An overflow signal, unless the stated numbers show max_tokens alone fills the window. */
function confirm(signal: Signal, evidence: Evidence): Verdict {
  const limits = limitsOf(evidence);
  if (signal.reason === 'context_length' && completionCrowdsOutPrompt(limits)) {
    return notOverlong('completion_fills_window');
  }
  return { overlong: true, reason: signal.reason, limits, rule: signal.rule };
}

function findVeto(evidence: Evidence): string | undefined {
  const rateLimit = findRateLimit(evidence);
  if (rateLimit !== undefined) return rateLimit;
  for (const code of evidence.codes) {
    const rule = NOT_OVERLONG_CODES.get(code);
    if (rule !== undefined) return rule;
  }
  return stringLimitTarget(evidence) === 'schema' ? 'schema_string_too_long' : undefined;
}

function findRateLimit(evidence: Evidence): string | undefined {
  for (const code of evidence.codes) {
    const rule = NOT_OVERLONG_CODES.get(code);
    if (rule === 'rate_limit' || rule === 'quota') return rule;
  }
  return findPhrase(RATE_LIMIT_PHRASES, evidence.text);
}

function findOverlongCode(evidence: Evidence): Signal | undefined {
  for (const code of evidence.codes) {
    const reason = OVERLONG_CODES.get(code);
    if (reason !== undefined) return { rule: code, reason };
  }
  if (stringLimitTarget(evidence) === 'content') {
    return { rule: 'string_above_max_length', reason: 'context_length' };
  }
  return undefined;
}

/**
 * OpenAI's `string_above_max_length` caps one string: a message's content (compaction
 * shrinks it) or a tool name/description (a schema error). Unknown targets count as schema.
 */
function stringLimitTarget(evidence: Evidence): 'content' | 'schema' | undefined {
  if (!evidence.codes.includes('string_above_max_length')) return undefined;
  if (evidence.paths.some((p) => SCHEMA_PATH.test(p))) return 'schema';
  return evidence.paths.some((p) => CONTENT_PATH.test(p)) ? 'content' : 'schema';
}

function findOverlongPhrase(text: string): Signal | undefined {
  for (const { rule, reason, pattern } of OVERLONG_PHRASES) {
    if (pattern.test(text)) return { rule, reason };
  }
  return undefined;
}

function findPhrase(rules: readonly { rule: string; pattern: RegExp }[], text: string): string | undefined {
  return rules.find(({ pattern }) => pattern.test(text))?.rule;
}

function limitsOf(evidence: Evidence): StatedLimits {
  return extractLimits(evidence.text, evidence.fields);
}

function notOverlong(rule: string): Verdict {
  return { overlong: false, rule };
}
