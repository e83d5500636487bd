/**
 * The one place that reads provider error text (decisions: test/fixtures/README.md). Body before status (llama.cpp has answered
 * overflows with 500, aggregators with 200); codes before phrases; phrases before numbers; numbers only to overrule an overflow
 * whose requested completion leaves no room for a prompt. 429 is a rate limit whatever it says; 413 a body-size rejection unless
 * its body says per-minute quota.
 */
import { echoesIn } from './echo.js';
import { gatherEvidence, MAX_SCAN_CHARS, type Evidence } from './evidence.js';
import { codeWords, decideGeneral, findGeneralVeto, prose, readStatements } from './general.js';
import { completionCrowdsOutPrompt, limitReader } from './numbers.js';
import { readQuantities } from './quantities.js';
import {
  BINDING_PHRASES,
  COMPLETION_PATH,
  CONTENT_PATH,
  NOT_OVERLONG_CODES,
  NOT_OVERLONG_PHRASES,
  OVERLONG_CODES,
  OVERLONG_PHRASES,
  RULES,
  SCHEMA_PATH,
  SIZE_COMPLAINT,
  STATEMENTS,
  type CodeRule,
  type OverlongPhrase,
  type PhraseRule,
  type Rule,
  type Signal,
} from './rules.js';
import type { StatedLimits, UpstreamError, Verdict } from './types.js';

export type { StatedLimits, Verdict } from './types.js';
export type { Rule } from './rules.js';

/** `request`: the body the error answers, read only when a verdict would act: text it supplied (echo.ts) never makes one. */
export interface Classifier {
  /** An error response (status >= 400, or a 200 JSON body that carries an error object). */
  classifyResponse(error: UpstreamError, request?: unknown): Verdict;
  /** One server-sent event's `data` payload (or the raw first chunk of a 200 stream). */
  classifyStreamEvent(data: string, request?: unknown): Verdict;
}

// Cheap pre-check for stream chunks: normal deltas contain none of these words.
const ERROR_MARKER = /error|exception|exceed|too long|too large|overflow|failed/i;

/** Bytes a success's first chunk must hold to be worth classifying: an error, or a stop reason naming the window. */
const VERDICT_MARKS = [Buffer.from('error'), Buffer.from('exceeded')];

/** Whether a successful answer's first bytes can carry anything but a success (the relay's cheap check). */
export function mayCarryVerdict(bytes: Buffer): boolean {
  return VERDICT_MARKS.some((mark) => bytes.includes(mark));
}

/** Specific rules in the tables' order, then the general layer; scripts/lofo.ts leaves families out to measure the general layer. */
export function createClassifier(rules: readonly Rule[]): Classifier {
  const read = readerOf(rules);
  const response = (status: number, body: string, echoes: readonly string[]): Judged => {
    const evidence = gatherEvidence(body, status >= 400, echoes);
    if (status < 400 && evidence.windowStopBeforeOutput) return { evidence, verdict: windowStop() };
    if (status < 400 && !evidence.carriesError) return { evidence, verdict: notOverlong('no_error_object') };
    return { evidence, verdict: status === 413 ? decide413(read(evidence)) : decide(read(evidence)) };
  };
  const streamEvent = (data: string, echoes: readonly string[]): Judged => {
    const evidence = gatherEvidence(data, false, echoes);
    if (evidence.windowStopBeforeOutput) return { evidence, verdict: windowStop() };
    if (!evidence.carriesError) return { evidence, verdict: notOverlong('no_error_object') };
    return { evidence, verdict: decide(read(evidence)) };
  };
  return {
    classifyResponse(error, request) {
      try {
        const status = Number.isInteger(error.status) ? error.status : 0;
        const body = typeof error.body === 'string' ? error.body : '';
        if (status === 429) return notOverlong('status_429');
        return unechoed(response(status, body, []), request, (echoes) => response(status, body, echoes));
      } catch {
        // A classifier bug must never break the relay: the error goes to the client as it came.
        return notOverlong('classifier_failed');
      }
    },
    classifyStreamEvent(data, request) {
      try {
        if (typeof data !== 'string') return notOverlong('no_error_marker');
        if (!ERROR_MARKER.test(data.slice(0, MAX_SCAN_CHARS))) return notOverlong('no_error_marker');
        return unechoed(streamEvent(data, []), request, (echoes) => streamEvent(data, echoes));
      } catch {
        return notOverlong('classifier_failed');
      }
    },
  };
}

interface Judged {
  evidence: Evidence;
  verdict: Verdict;
}

/** Once text the request supplied is cut out, when the first verdict would act (a rescued overflow, a mended bound-state refusal). */
function unechoed(first: Judged, request: unknown, again: (echoes: readonly string[]) => Judged): Verdict {
  if (request === undefined || !(first.verdict.overlong || BINDING_RULES.has(first.verdict.rule))) return first.verdict;
  const echoes = echoesIn(first.evidence.text, request);
  if (echoes === null) return notOverlong('echoes_request');
  return echoes.length === 0 ? first.verdict : again(echoes).verdict;
}

export const { classifyResponse, classifyStreamEvent } = createClassifier(RULES);

/** An answer that stopped for the window before any output: the request did not fit, said as a stop reason. */
function windowStop(): Verdict {
  return { overlong: true, reason: 'context_length', limits: {}, rule: 'window_stop_reason' };
}

/** Made once per error, all up front though a veto may leave some unread: each rule is one bounded pass. */
interface Reading extends Evidence {
  prose: string;
  codeWords: string;
  /** A refusal of bound provider state (BINDING_PHRASES). */
  binding?: string;
  overlong?: Signal;
  /** Too big, but not the prompt (NOT_OVERLONG_PHRASES). */
  notOverlong?: string;
  stated: StatedLimits;
}

function readerOf(rules: readonly Rule[]): (evidence: Evidence) => Reading {
  const given = new Set(rules);
  const binding = BINDING_PHRASES.filter((r) => given.has(r));
  const codes = new Map(OVERLONG_CODES.filter((r) => given.has(r)).map((r) => [r.code, r]));
  const phrases = OVERLONG_PHRASES.filter((r) => given.has(r));
  const negatives = NOT_OVERLONG_PHRASES.filter((r) => given.has(r));
  const readLimits = limitReader(STATEMENTS.filter((r) => given.has(r)));
  return (evidence) => {
    const { text } = evidence;
    return {
      ...evidence,
      prose: prose(text),
      codeWords: codeWords(evidence.codes),
      binding: firstMatch(binding, text)?.rule,
      overlong: findOverlongCode(evidence, codes) ?? findOverlongPhrase(phrases, text),
      notOverlong: firstMatch(negatives, text)?.rule,
      stated: readLimits(text, evidence.fields),
    };
  };
}

function firstMatch<T extends PhraseRule>(phrases: readonly T[], text: string): T | undefined {
  return phrases.find(({ pattern }) => pattern.test(text));
}

function findOverlongPhrase(phrases: readonly OverlongPhrase[], text: string): Signal | undefined {
  const found = firstMatch(phrases, text);
  return found === undefined ? undefined : { rule: found.rule, reason: found.reason };
}

/** The verdict on an error that refused bound provider state (see BINDING_PHRASES): the rescue may mend its own rewrite. */
export function isBindingRefusal(verdict: Verdict): boolean {
  return !verdict.overlong && BINDING_RULES.has(verdict.rule);
}

const BINDING_RULES = new Set(BINDING_PHRASES.map((p) => p.rule));

/** Signed state refused itself (another prefix, a bad signature), which removing it mends; not the opt-in or a missing open-round block. */
export function refusesBoundState(verdict: Verdict): boolean {
  return !verdict.overlong && verdict.rule === 'thinking_bound_elsewhere';
}

function decide(r: Reading): Verdict {
  if (r.binding !== undefined) return notOverlong(r.binding);
  const veto = findVeto(r);
  if (veto !== undefined) return notOverlong(veto);
  const numbers = readQuantities(r.prose);
  if (r.overlong !== undefined) return confirm(r.overlong, r, numbers.limits);
  if (r.notOverlong !== undefined) return notOverlong(r.notOverlong);
  const general = decideGeneral(readStatements(r.prose, r.codeWords), numbers);
  if (general === undefined) return notOverlong('no_signal');
  if (!general.overlong) return notOverlong(general.rule);
  return confirm({ rule: general.rule, reason: general.reason }, r, numbers.limits);
}

/** Any 413 is a body-size rejection, except a per-minute token quota dressed as one (Groq). */
function decide413(r: Reading): Verdict {
  const rateLimit = findRateLimit(r);
  if (rateLimit !== undefined) return notOverlong(rateLimit);
  return {
    overlong: true,
    reason: 'body_too_large',
    limits: limitsOf(r, readQuantities(r.prose).limits),
    rule: r.overlong?.rule ?? 'status_413',
  };
}

/** An overflow signal, unless the stated numbers show max_tokens alone fills the window. */
function confirm(signal: Signal, r: Reading, general: StatedLimits): Verdict {
  const limits = limitsOf(r, general);
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
  if (blamed !== undefined && blamed !== 'content' && SIZE_COMPLAINT.test(r.prose))
    return blamed === 'completion' ? 'completion_value_cap' : 'schema_field_size';
  return findGeneralVeto(r.prose, r.codeWords);
}

/** Content wins: an error that names the conversation among the fields it blames is about its size. */
function blamedField(r: Reading): 'content' | 'completion' | 'schema' | undefined {
  const paths = r.paths.map((p) => p.trim()).filter((p) => p !== '' && p !== 'null');
  if (paths.length === 0) return undefined;
  if (paths.some((p) => CONTENT_PATH.test(p) && !SCHEMA_PATH.test(p))) return 'content';
  return paths.some((p) => COMPLETION_PATH.test(p)) ? 'completion' : 'schema';
}

/** Only a rate limit or a quota vetoes a 413, in its text or its codes' words (`insufficient_quota`, `RESOURCE_EXHAUSTED`). */
function findRateLimit(r: Reading): string | undefined {
  const veto = findGeneralVeto(r.prose, r.codeWords);
  return veto === 'rate_limit' || veto === 'quota' ? veto : undefined;
}

function findOverlongCode(r: Evidence, codes: ReadonlyMap<string, CodeRule>): Signal | undefined {
  for (const code of r.codes) {
    const found = codes.get(code);
    if (found !== undefined) return { rule: code, reason: found.reason };
  }
  if (stringLimitTarget(r) === 'content') {
    return { rule: 'string_above_max_length', reason: 'context_length' };
  }
  return undefined;
}

/** OpenAI's cap on one string: a message's content (compaction shrinks it) or a tool name/description (schema); unknown targets: schema. */
function stringLimitTarget(r: Evidence): 'content' | 'schema' | undefined {
  if (!r.codes.includes('string_above_max_length')) return undefined;
  if (r.paths.some((p) => SCHEMA_PATH.test(p))) return 'schema';
  return r.paths.some((p) => CONTENT_PATH.test(p)) ? 'content' : 'schema';
}

/** Specific statements first, then numeric fields, then the general reading; completionCounted last. */
function limitsOf(r: Reading, general: StatedLimits): StatedLimits {
  const limits = { ...r.stated };
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
