import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent } from '../../src/overlong/classify.js';

// Issue 15: classify.ts pinned by what the gateway reports (verdict, rule name, numbers).
const codes = (n: number, last: string) => JSON.stringify(Array.from({ length: n + 1 }, (_, i) => ({ error: { code: i === n ? last : `code_${i}` } })));

describe('a 413 is vetoed by a rate-limit or quota code among the first 32 codes of the body', () => {
  // The vetoes read the words of the codes as far as the first 32 (a bound on hostile bodies);
  // since the code tables name only permission_error, a veto code past them is not seen.
  it.each([
    ['rate_limit_exceeded', 'rate_limit'],
    ['insufficient_quota', 'quota'],
  ])('%s after 31 other codes -> %s; after 32, the 413 stands', (code, rule) => {
    expect(classifyResponse({ status: 413, body: codes(31, code) })).toEqual({ overlong: false, rule });
    expect(classifyResponse({ status: 413, body: codes(32, code) })).toMatchObject({ overlong: true, reason: 'body_too_large' });
  });

  it('another veto code there does not turn a 413 around', () => {
    expect(classifyResponse({ status: 413, body: codes(32, 'content_filter') })).toEqual({
      overlong: true,
      reason: 'body_too_large',
      limits: {},
      rule: 'status_413',
    });
  });
});

describe('string_above_max_length', () => {
  it('on a message content named in the text, with an empty param, is an overflow', () => {
    const body = JSON.stringify({ error: { message: "Invalid 'messages[3].content': string too long.", param: '', code: 'string_above_max_length' } });
    expect(classifyResponse({ status: 400, body })).toMatchObject({ overlong: true, reason: 'context_length', rule: 'string_above_max_length' });
  });
});

describe('stream events that are no strings', () => {
  it.each([null, undefined, Symbol('x')])('%s has no error marker', (data) => {
    expect(classifyStreamEvent(data as unknown as string)).toEqual({ overlong: false, rule: 'no_error_marker' });
  });
});
