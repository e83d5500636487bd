import { describe, expect, it } from 'vitest';
import { validateCompaction } from '../../src/compaction/validate.js';
import type { ChatMessage } from '../../src/compaction/types.js';
import { calls, result, say, system, user } from './conversations.js';

const padding = say('x'.repeat(5000));
const summary = user('[compaction-gateway] summary');
const original: ChatMessage[] = [
  system('rules'),
  { role: 'developer', content: 'more rules' },
  user('task'),
  padding,
  calls('a', 'b'),
  result('a'),
  result('b'),
  say('done'),
];
const good = [original[0], original[1], summary, original[2], ...original.slice(4)];

describe('validateCompaction', () => {
  it('accepts a proper compaction', () => {
    expect(validateCompaction(original, good)).toEqual([]);
  });

  it('accepts equal copies of kept messages, not only the same objects', () => {
    expect(validateCompaction(original, structuredClone(good))).toEqual([]);
  });

  it('flags a changed, missing or reordered head', () => {
    const changed = [system('rules!'), ...good.slice(1)];
    expect(validateCompaction(original, changed)).toEqual([expect.stringContaining('leading system message #0')]);
    const swapped = [good[1], good[0], ...good.slice(2)];
    expect(validateCompaction(original, swapped)).toHaveLength(2);
    expect(validateCompaction(original, good.slice(1))).not.toEqual([]);
  });

  it('flags a missing or changed last user message', () => {
    const without = good.filter((m) => m !== original[2]);
    expect(validateCompaction(original, without)).toEqual(['the last user message of the original is missing or changed']);
    const changed = good.map((m) => (m === original[2] ? user('task (edited)') : m));
    expect(validateCompaction(original, changed)).toEqual(['the last user message of the original is missing or changed']);
  });

  it('flags a tool result whose call was dropped', () => {
    const orphaned = good.filter((m) => m !== original[4]);
    expect(validateCompaction(original, orphaned)).toEqual([
      'tool message for call "a" has no earlier assistant tool call with that id',
      'tool message for call "b" has no earlier assistant tool call with that id',
    ]);
  });

  it('flags a tool call whose result was dropped', () => {
    const unanswered = good.filter((m) => m !== original[6]);
    expect(validateCompaction(original, unanswered)).toEqual(['assistant tool call "b" is not followed by its tool result']);
  });

  it('flags a tool result moved away from its call', () => {
    const moved = [...good.filter((m) => m !== original[6]), original[6]];
    expect(validateCompaction(original, moved)).toEqual(['assistant tool call "b" is not followed by its tool result']);
  });

  it('leaves tool-call problems the original already had to the client', () => {
    const pending = [...original, calls('z')];
    const orphanedByClient = [...original.slice(0, 3), result('ghost'), ...original.slice(3)];
    expect(validateCompaction(pending, [...good, calls('z')])).toEqual([]);
    expect(validateCompaction(orphanedByClient, [...good.slice(0, 4), result('ghost'), ...good.slice(4)])).toEqual([]);
  });

  it('flags a result that is not smaller', () => {
    expect(validateCompaction(original, original)).toEqual([expect.stringMatching(/^compacted messages are [\d,]+ bytes, not smaller than the original/)]);
  });
});
