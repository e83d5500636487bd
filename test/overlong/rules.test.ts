import { describe, expect, it } from 'vitest';
import { loadFixtures, rulesWithout } from '../../scripts/lofo.js';
import { classifyResponse, createClassifier } from '../../src/overlong/classify.js';
import { gatherEvidence } from '../../src/overlong/evidence.js';
import { limitReader, NUMBER_GROUPS } from '../../src/overlong/numbers.js';
import { NOT_OVERLONG_PHRASES, OVERLONG_CODES, OVERLONG_PHRASES, STATEMENTS } from '../../src/overlong/rules.js';

// rules.ts promises each specific rule a fixture or a test case. These tests hold it to that:
// every rule still matches the wording it was written from, decides it (unless an earlier
// phrase in the same text always does), and goes quiet when its family is switched off.
const EXTRA_WORDINGS = [
  // GLM-compatible endpoints; no full body was found (see test/fixtures/README.md)
  'The number of input tokens (140000) has exceeded max_prompt_tokens (131072)',
  // express/raw-body and Hono-style servers
  'Request body is too large',
  // Anthropic's edge, older wording
  'Request exceeds the maximum size',
  // Groq
  '`max_tokens` must be less than or equal to `8192`, the maximum value for `max_tokens` is less than the `context_window` for this model',
];
const texts = [...loadFixtures().map((f) => gatherEvidence(f.body, f.status >= 400).text), ...EXTRA_WORDINGS];
/** Phrases whose every wording also holds an earlier phrase, which decides first. */
const SHADOWED = new Set([
  'reduce_your_prompt', // always after "maximum context length is N tokens"
  'requested_token_count_exceeds', // SGLang states the completion-fills-window numbers too
  'litellm_context_window_exceeded', // LiteLLM wraps a provider text another rule reads
]);
const asBody = (text: string) => JSON.stringify({ error: { message: text } });
const generalOnly = createClassifier([]);

describe('every specific phrase', () => {
  it.each(OVERLONG_PHRASES.map((p) => [p.rule, p] as const))('%s matches its wording and decides it', (_rule, p) => {
    const wordings = texts.filter((t) => p.pattern.test(t));
    expect(wordings.length).toBeGreaterThan(0);
    const decided = wordings.filter((t) => classifyResponse({ status: 400, body: asBody(t) }).rule === p.rule);
    if (!SHADOWED.has(p.rule)) {
      expect(decided.length).toBeGreaterThan(0);
      const off = createClassifier(rulesWithout(p.family)).classifyResponse({ status: 400, body: asBody(decided[0]) });
      expect(off.rule).not.toBe(p.rule);
      const verdict = classifyResponse({ status: 400, body: asBody(decided[0]) });
      if (verdict.overlong) expect(verdict.reason).toBe(p.reason);
    }
  });

  it.each(NOT_OVERLONG_PHRASES.map((p, i) => [`${p.rule} #${i}`, p] as const))('%s matches its wording and vetoes it', (_name, p) => {
    const wordings = texts.filter((t) => p.pattern.test(t));
    expect(wordings.length).toBeGreaterThan(0);
    expect(wordings.some((t) => classifyResponse({ status: 400, body: asBody(t) }).rule === p.rule)).toBe(true);
    expect(wordings.some((t) => generalOnly.classifyResponse({ status: 400, body: asBody(t) }).rule === p.rule)).toBe(
      p.rule === 'output_token_cap' || p.rule === 'attachment_limit',
    );
  });
});

describe('every specific code', () => {
  it.each(OVERLONG_CODES.map((rule) => [rule.code, rule] as const))('%s decides, and goes quiet with its family off', (code, rule) => {
    const body = JSON.stringify({ error: { code, message: 'bad request' } });
    expect(classifyResponse({ status: 400, body })).toMatchObject({ overlong: true, rule: code, reason: rule.reason });
    expect(createClassifier(rulesWithout(rule.family)).classifyResponse({ status: 400, body }).rule).not.toBe(code);
  });
});

// Every pattern with named groups: the phrases' own numbers and the numbers-only sentences.
const STATING = STATEMENTS.filter((p) => /\(\?<[A-Za-z]/.test(p.pattern.source));

describe('every number statement', () => {
  it.each(STATING.map((p, i) => [`#${i} ${p.family}`, p] as const))('%s reads numbers from its wording', (_name, p) => {
    const wordings = texts.filter((t) => Object.values(p.pattern.exec(t)?.groups ?? {}).some((d) => d !== undefined));
    expect(wordings.length).toBeGreaterThan(0);
    const groups = p.pattern.exec(wordings[0])?.groups ?? {};
    // a misspelt group name would read nothing, silently
    for (const name of Object.keys(groups)) expect(NUMBER_GROUPS, name).toContain(name);
    const limits = limitReader(STATEMENTS.filter((r) => r.family === p.family))(wordings[0], {});
    for (const [field, digits] of Object.entries(groups)) {
      if (digits !== undefined) expect(limits[field as keyof typeof limits], field).toBe(Number(digits));
    }
    expect(limitReader([])(wordings[0], {})).toEqual({});
  });
});
