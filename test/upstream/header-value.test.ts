import { expect, it } from 'vitest';
import { headerValue } from '../../src/upstream/headers.js';

it.each([
  [undefined, undefined],
  ['gzip', 'gzip'],
  [['gzip', 'br'], 'gzip, br'],
  [['text/event-stream'], 'text/event-stream'],
])('a header given as %j reads as %j', (given, read) => {
  expect(headerValue(given)).toBe(read);
});
