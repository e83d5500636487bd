import { describe, expect, it } from 'vitest';
import { pathOf, queryOf } from '../../src/lib/url.js';

describe('a request URL split at its query', () => {
  it.each([
    ['/v1/models', '/v1/models', ''],
    ['/v1beta/models/g:generateContent?key=k&alt=sse', '/v1beta/models/g:generateContent', '?key=k&alt=sse'],
    ['/v1/x?', '/v1/x', '?'],
    ['/v1/x?a=1?b=2', '/v1/x', '?a=1?b=2'],
    ['?only', '', '?only'],
  ])('%s is path %s and query %s', (url, path, query) => {
    expect(pathOf(url)).toBe(path);
    expect(queryOf(url)).toBe(query);
    expect(pathOf(url) + queryOf(url)).toBe(url);
  });
});
