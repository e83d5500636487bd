import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent, type Verdict } from '../../src/overlong/classify.js';

function isVerdict(v: Verdict): boolean {
  if (typeof v.rule !== 'string' || v.rule.length === 0) return false;
  if (!v.overlong) return v.overlong === false;
  return (v.reason === 'body_too_large' || v.reason === 'context_length') && typeof v.limits === 'object';
}

// Fragments real bodies are made of, so random bodies reach the deep branches.
const fragment = fc.constantFrom(
  '{',
  '}',
  '[',
  ']',
  '"',
  ':',
  ',',
  '\\',
  '\n',
  'data: ',
  'event: error\n',
  '{"error":',
  '"message":',
  '"code":"context_length_exceeded"',
  '"code":"string_above_max_length"',
  '"param":"tools[0].function.name"',
  "This model's maximum context length is ",
  'prompt is too long: ',
  ' tokens > ',
  ' maximum',
  '(TPM)',
  '413 Request Entity Too Large',
  'max_tokens is too large',
  ' in the completion)',
  '99999999999999999999',
  '4096',
  '-1',
  'NaN',
  '\uD800',
  '\uFFFF',
  '<html>',
  'ContextWindowExceededError',
);
const body = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.array(fragment, { maxLength: 60 }).map((parts) => parts.join('')),
  fc.json(),
  fc.jsonValue().map((v) => JSON.stringify({ error: v })),
);
const status = fc.oneof(fc.integer({ min: 100, max: 599 }), fc.constantFrom(0, -1, 413, 429, 200, 500, Number.NaN, 1e9));

describe('never throws, always returns a verdict', () => {
  it('classifyResponse on random bodies and statuses', () => {
    fc.assert(
      fc.property(status, body, fc.option(fc.string(), { nil: undefined }), (s, b, contentType) => {
        expect(isVerdict(classifyResponse({ status: s, body: b, contentType }))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('classifyStreamEvent on random chunks', () => {
    fc.assert(
      fc.property(body, (b) => {
        expect(isVerdict(classifyStreamEvent(b))).toBe(true);
        expect(isVerdict(classifyStreamEvent(`data: ${b}\n\n`))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('tolerates values that break the declared types', () => {
    const bad = [undefined, null, 42, {}, [], Symbol('x')] as unknown[];
    for (const b of bad) {
      expect(isVerdict(classifyResponse({ status: 400, body: b as string }))).toBe(true);
      expect(isVerdict(classifyStreamEvent(b as string))).toBe(true);
    }
    expect(isVerdict(classifyResponse(null as unknown as { status: number; body: string }))).toBe(true);
  });
});
