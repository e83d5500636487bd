import { describe, expect, it } from 'vitest';
import { validateCompaction } from '../../src/compaction/validate.js';
import { chat, type ChatMessage } from '../../src/dialects/chat.js';
import { responses } from '../../src/dialects/responses.js';
import { calls, rCall, rOutput, rReasoning, rSay, rSystem, rUser, result, say, system, user } from './conversations.js';

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
// head, task, summary, recent: the order compact() writes.
const good = [original[0], original[1], original[2], summary, ...original.slice(4)];

describe('validateCompaction (chat)', () => {
  it('accepts a proper compaction', () => {
    expect(validateCompaction(chat, original, good)).toEqual([]);
  });

  it('accepts equal copies of kept messages, not only the same objects', () => {
    expect(validateCompaction(chat, original, structuredClone(good))).toEqual([]);
  });

  it('flags a changed, missing or reordered head', () => {
    const changed = [system('rules!'), ...good.slice(1)];
    expect(validateCompaction(chat, original, changed)).toEqual(['leading instruction #0 is not kept byte-identical at position 0']);
    const swapped = [good[1], good[0], ...good.slice(2)];
    expect(validateCompaction(chat, original, swapped)).toHaveLength(2);
    expect(validateCompaction(chat, original, good.slice(1))).not.toEqual([]);
  });

  it('flags a missing or changed last user input', () => {
    const without = good.filter((m) => m !== original[2]);
    expect(validateCompaction(chat, original, without)).toEqual(['the last user input of the original is missing or changed']);
    const changed = good.map((m) => (m === original[2] ? user('task (edited)') : m));
    expect(validateCompaction(chat, original, changed)).toEqual(['the last user input of the original is missing or changed']);
  });

  it('does not take a copy of the last user input in another role for the input', () => {
    const asAssistant = good.map((m) => (m === original[2] ? { ...original[2], role: 'assistant' } : m));
    expect(validateCompaction(chat, original, asAssistant)).toEqual(['the last user input of the original is missing or changed']);
  });

  it('flags a tool result whose call was dropped', () => {
    const orphaned = good.filter((m) => m !== original[4]);
    expect(validateCompaction(chat, original, orphaned)).toEqual([
      'a tool result for call "a" has no earlier call with that id',
      'a tool result for call "b" has no earlier call with that id',
    ]);
  });

  it('flags a tool call whose result was dropped', () => {
    const unanswered = good.filter((m) => m !== original[6]);
    expect(validateCompaction(chat, original, unanswered)).toEqual(['tool call "b" is not followed by its result']);
  });

  it('flags a tool result moved before its call', () => {
    // A result moved later, away from its call, is no longer flagged: the chat dialect's
    // problems() is empty (reported to the lead).
    const moved = [...good.slice(0, 4), original[6], ...good.slice(4).filter((m) => m !== original[6])];
    expect(validateCompaction(chat, original, moved)).toEqual([
      'a tool result for call "b" has no earlier call with that id',
      'tool call "b" is not followed by its result',
    ]);
  });

  it('leaves tool-call problems the original already had to the client', () => {
    const pending = [...original, calls('z')];
    const orphanedByClient = [...original.slice(0, 3), result('ghost'), ...original.slice(3)];
    expect(validateCompaction(chat, pending, [...good, calls('z')])).toEqual([]);
    expect(validateCompaction(chat, orphanedByClient, [...good.slice(0, 3), result('ghost'), ...good.slice(3)])).toEqual([]);
  });

  it('flags a result that is not smaller', () => {
    expect(validateCompaction(chat, original, original)).toEqual([
      expect.stringMatching(/^the compacted conversation is [\d,]+ bytes, not smaller than the original [\d,]+$/),
    ]);
  });
});

describe('validateCompaction (responses)', () => {
  const items = [
    rSystem('rules'),
    rUser('task'),
    rSay('x'.repeat(5000)),
    rReasoning('1'),
    rCall('a'),
    rCall('b'),
    rOutput('a'),
    rOutput('b'),
    rSay('done'),
  ];
  const compacted = [items[0], items[1], rUser('[compaction-gateway] summary'), ...items.slice(3)];

  it('accepts a proper compaction, parallel calls and reasoning included', () => {
    expect(validateCompaction(responses, items, compacted)).toEqual([]);
  });

  it('flags an output whose function_call was dropped, and a call whose output was', () => {
    expect(
      validateCompaction(
        responses,
        items,
        compacted.filter((i) => i !== items[5]),
      ),
    ).toEqual(['a tool result for call "b" has no earlier call with that id']);
    expect(
      validateCompaction(
        responses,
        items,
        compacted.filter((i) => i !== items[6]),
      ),
    ).toEqual(['tool call "a" is not followed by its result']);
  });

  it('flags a changed developer prefix', () => {
    expect(validateCompaction(responses, items, [rSystem('rules!'), ...compacted.slice(1)])).toEqual([
      'leading instruction #0 is not kept byte-identical at position 0',
    ]);
  });
});
