import { beforeEach, expect, it, vi } from 'vitest';

// Count the comparisons createKeyCheck makes, without changing what they return.
const compare = vi.hoisted(() => ({ calls: [] as Array<[number, number]> }));
vi.mock('node:crypto', async (importOriginal) => {
  const crypto = await importOriginal<typeof import('node:crypto')>();
  return {
    ...crypto,
    timingSafeEqual: (a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView) => {
      compare.calls.push([a.byteLength, b.byteLength]);
      return crypto.timingSafeEqual(a, b);
    },
  };
});

const { createKeyCheck } = await import('../../src/http/auth.js');

const KEYS = ['gw-first-key-1111111111', 'gw-second-key-2222222222', 'k'];
const check = createKeyCheck(KEYS);

beforeEach(() => {
  compare.calls.length = 0;
});

/*
 * Constant time: whatever the presented token (right, wrong, a prefix, one byte off, very long),
 * the check hashes it and compares it with every configured key, each time over 32 bytes, so
 * neither how far a guess matched nor which key it matched shows in the timing.
 */
it.each([
  ['the first key', `Bearer ${KEYS[0]}`, true],
  ['the last key', `Bearer ${KEYS[2]}`, true],
  ['a wrong key', 'Bearer nope', false],
  ['a prefix of a key', `Bearer ${KEYS[1].slice(0, 10)}`, false],
  ['a key off by its last byte', `Bearer ${KEYS[0].slice(0, -1)}2`, false],
  ['a key and more', `Bearer ${KEYS[0]}${KEYS[1]}`, false],
  ['a 1 MB token', `Bearer ${'x'.repeat(1_000_000)}`, false],
])('%s: every key compared, over equal lengths', (_name, authorization, ok) => {
  expect(check(authorization)).toBe(ok);
  expect(compare.calls).toHaveLength(KEYS.length);
  for (const [a, b] of compare.calls) expect([a, b]).toEqual([32, 32]);
});

it.each([undefined, '', 'Bearer', 'Bearer   ', 'Basic abc', 'gw-first-key-1111111111'])(
  'no Bearer token (%j): refused',
  (authorization) => {
    expect(check(authorization)).toBe(false);
  },
);

// Anthropic's clients send their key as x-api-key: the same check, the same comparisons.
it.each([
  ['the second key as x-api-key', undefined, KEYS[1], true],
  ['a wrong x-api-key', undefined, 'nope', false],
  ['a prefix as x-api-key', undefined, KEYS[1].slice(0, 10), false],
])('%s: every key compared, over equal lengths', (_name, authorization, apiKey, ok) => {
  expect(check(authorization, apiKey)).toBe(ok);
  expect(compare.calls).toHaveLength(KEYS.length);
  for (const [a, b] of compare.calls) expect([a, b]).toEqual([32, 32]);
});

it('a Bearer token and an x-api-key: either may be the key, both are compared with every key', () => {
  expect(check('Bearer sk-ant-upstream', KEYS[0])).toBe(true);
  expect(check(`Bearer ${KEYS[0]}`, 'sk-ant-upstream')).toBe(true);
  expect(check('Bearer nope', 'nope')).toBe(false);
  expect(compare.calls).toHaveLength(3 * 2 * KEYS.length);
});
