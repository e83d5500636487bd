import { describe, expect, it } from 'vitest';
import { headEnd, lastOfRole, openingEnd, unitsOf } from '../../src/compaction/conversation.js';
import { validateCompaction } from '../../src/compaction/validate.js';
import { chat } from '../../src/dialects/chat.js';
import { responses } from '../../src/dialects/responses.js';

/*
 * The planner's view of a conversation, the same for every API: the head kept byte-identical, the
 * opening, the units that are kept or dropped whole, and the guard a compacted request must pass.
 */

const sys = (content = 'rules') => ({ role: 'system', content });
const user = (content: string) => ({ role: 'user', content });
const said = (content: string) => ({ role: 'assistant', content });
const calls = (...ids: string[]) => ({
  role: 'assistant',
  content: null,
  tool_calls: ids.map((id) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } })),
});
const result = (id: string, content = 'out') => ({ role: 'tool', tool_call_id: id, content });
const entries = (items: unknown[]) => chat.read({ messages: items })!.entries;

describe('head, opening, last of a role', () => {
  it('the head is the leading instructions; the opening runs to the model’s first turn', () => {
    const e = entries([sys(), { role: 'developer', content: 'd' }, user('task'), sys('late'), user('more'), said('ok'), user('next')]);
    expect(headEnd(e)).toBe(2);
    expect(openingEnd(e)).toBe(5);
  });

  it('the opening never takes the last item, and an all-instruction list is all head', () => {
    expect(openingEnd(entries([sys(), user('a'), user('b')]))).toBe(2);
    expect(openingEnd(entries([user('only')]))).toBe(0);
    expect(headEnd(entries([sys(), sys()]))).toBe(2);
    expect(openingEnd(entries([sys(), sys()]))).toBe(2);
    expect(headEnd([])).toBe(0);
    expect(openingEnd([])).toBe(0);
  });

  it('lastOfRole searches from the end, not before `from`', () => {
    const e = entries([user('a'), said('b'), user('c'), said('d')]);
    expect(lastOfRole(e, 'user')).toBe(2);
    expect(lastOfRole(e, 'user', 2)).toBe(2);
    expect(lastOfRole(e, 'user', 3)).toBe(-1);
    expect(lastOfRole(e, 'tool')).toBe(-1);
    expect(lastOfRole(e, 'user', 0)).toBe(2);
    expect(lastOfRole(entries([user('a'), said('b')]), 'user')).toBe(0);
  });
});

describe('units: what is kept or dropped whole', () => {
  it('a call with all its results, parallel calls with theirs, plain turns alone', () => {
    const e = entries([user('t'), calls('a', 'b'), result('a'), result('b'), said('x'), calls('c'), result('c'), user('u')]);
    expect(unitsOf(e, 1)).toEqual([
      [1, 4],
      [4, 5],
      [5, 7],
      [7, 8],
    ]);
    expect(unitsOf(e, 0)[0]).toEqual([0, 1]);
    expect(unitsOf(e, 8)).toEqual([]);
  });

  it('calls issued one item at a time, then their results, are one unit (Responses)', () => {
    const input = [
      { role: 'user', content: 't' },
      { type: 'reasoning', encrypted_content: 'r1' },
      { type: 'function_call', call_id: 'a', name: 'f', arguments: '{}' },
      { type: 'function_call', call_id: 'b', name: 'f', arguments: '{}' },
      { type: 'function_call_output', call_id: 'a', output: 'x' },
      { type: 'function_call_output', call_id: 'b', output: 'y' },
      { type: 'reasoning', encrypted_content: 'r2' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'done' }] },
      { type: 'reasoning', encrypted_content: 'r3' },
    ];
    const e = responses.read({ input })!.entries;
    expect(unitsOf(e, 0)).toEqual([
      [0, 1],
      [1, 6],
      [6, 8],
      [8, 9],
    ]);
  });

  it('an answered call is closed: the next call starts a unit of its own', () => {
    const e = entries([calls('a'), result('a'), calls('b'), result('b')]);
    expect(unitsOf(e, 0)).toEqual([
      [0, 2],
      [2, 4],
    ]);
  });

  it('while a call is open, a legacy function result (no id) still belongs to it; an ordinary turn does not', () => {
    const e = entries([calls('a'), { role: 'function', name: 'f', content: 'x' }, result('a'), said('after')]);
    expect(unitsOf(e, 0)).toEqual([
      [0, 3],
      [3, 4],
    ]);
    const open = entries([calls('a'), said('no answer'), result('a')]);
    expect(unitsOf(open, 0)).toEqual([
      [0, 1],
      [1, 2],
      [2, 3],
    ]);
  });
});

describe('validateCompaction', () => {
  const original = [sys(), user('task'), calls('a'), result('a', 'x'.repeat(500)), said('old'), user('last'), calls('b'), result('b')];
  const summary = user('summary of 3');
  const good = [sys(), user('task'), summary, user('last'), calls('b'), result('b')];

  it('accepts a proper compaction, with equal copies as well as the same objects', () => {
    expect(validateCompaction(chat, original, good)).toEqual([]);
    expect(validateCompaction(chat, original, structuredClone(good))).toEqual([]);
  });

  it('a head changed, missing or moved', () => {
    expect(validateCompaction(chat, original, [sys('other'), ...good.slice(1)])).toEqual([
      'leading instruction #0 is not kept byte-identical at position 0',
    ]);
    const twoHead = [sys('a'), sys('b'), ...original.slice(1)];
    expect(validateCompaction(chat, twoHead, [sys('a'), user('task'), user('last'), calls('b'), result('b')])).toEqual([
      'leading instruction #1 is not kept byte-identical at position 1',
    ]);
    expect(validateCompaction(chat, [sys('a'), sys('b'), user('x'.repeat(100))], [sys('a')])).toEqual([
      'leading instruction #1 is not kept byte-identical at position 1',
      'the last user input of the original is missing or changed',
    ]);
  });

  it('the last user input missing, changed, or kept only as another role', () => {
    const problem = 'the last user input of the original is missing or changed';
    expect(validateCompaction(chat, original, [sys(), user('task'), summary, calls('b'), result('b')])).toEqual([problem]);
    expect(validateCompaction(chat, original, [sys(), user('task'), summary, user('LAST'), calls('b'), result('b')])).toEqual([problem]);
    // The same content as an assistant message is not the user's input.
    expect(
      validateCompaction(chat, original, [sys(), user('task'), summary, { role: 'assistant', content: 'last' }, calls('b'), result('b')]),
    ).toContain(problem);
    // A conversation with no user input has nothing to keep.
    expect(validateCompaction(chat, [sys(), said('x'.repeat(200)), said('y')], [sys(), said('y')])).toEqual([]);
  });

  it('a dropped call or result, named by id', () => {
    expect(validateCompaction(chat, original, [sys(), user('task'), summary, user('last'), result('b')])).toEqual([
      'a tool result for call "b" has no earlier call with that id',
    ]);
    expect(validateCompaction(chat, original, [sys(), user('task'), summary, user('last'), calls('b')])).toEqual([
      'tool call "b" is not followed by its result',
    ]);
    expect(validateCompaction(chat, original, [sys(), user('task'), summary, result('b'), user('last'), calls('b')])).toEqual([
      'a tool result for call "b" has no earlier call with that id',
      'tool call "b" is not followed by its result',
    ]);
  });

  it('a call answered twice is still answered; the client’s own orphans are not compaction’s fault', () => {
    const twice = [user('t'), calls('a'), result('a'), result('a', 'again'.repeat(40)), user('last')];
    expect(validateCompaction(chat, twice, [user('t'), calls('a'), result('a'), user('last')])).toEqual([]);
    const orphaned = [user('t'), result('ghost', 'x'.repeat(300)), calls('never'), said('y'), user('last')];
    expect(validateCompaction(chat, orphaned, [user('t'), result('ghost'), calls('never'), user('last')])).toEqual([]);
  });

  it('a call repeated with one answer left open is reported once', () => {
    const repeated = [user('t'), calls('a'), calls('a'), result('a'), said('x'.repeat(300)), user('last')];
    expect(validateCompaction(chat, repeated, [user('t'), calls('a'), user('last')])).toEqual([
      'tool call "a" is not followed by its result',
    ]);
  });

  it('wire problems only when compaction caused them', () => {
    const strict = { describe: chat.describe, problems: (items: unknown[]) => (items.length % 2 ? ['odd'] : []) };
    expect(validateCompaction(strict, original, good)).toEqual([]);
    expect(
      validateCompaction(
        strict,
        original,
        good
          .slice(0, 5)
          .concat([result('b')])
          .slice(1),
      ),
    ).toContain('odd');
    expect(validateCompaction(strict, original.slice(1), good.slice(1))).toEqual([]);
  });

  it('a result that is not smaller, with both sizes', () => {
    expect(validateCompaction(chat, [user('a'), user('b')], [user('a'), user('b')])).toEqual([
      'the compacted conversation is 61 bytes, not smaller than the original 61',
    ]);
    expect(validateCompaction(chat, [user('last')], [user('x'), user('last')])[0]).toMatch(
      /^the compacted conversation is \d+ bytes, not smaller than the original \d+$/,
    );
    expect(validateCompaction(chat, [user('xx'), user('last')], [user('x'), user('last')])).toEqual([]);
  });
});

describe('units, whatever the API says an item is', () => {
  const e = (role: 'user' | 'assistant' | 'tool' | 'instruction' | 'opaque', calls: string[] = [], answers: string[] = []) => ({
    role,
    calls,
    answers,
    joinsNext: false,
  });

  it('a user turn that answers an open call (tool results inside a user message) belongs to the call', () => {
    expect(unitsOf([e('assistant', ['a']), e('user', [], ['a']), e('user')], 0)).toEqual([
      [0, 2],
      [2, 3],
    ]);
  });

  it('a system message in the middle of a conversation is a unit of its own', () => {
    expect(unitsOf(entries([user('a'), said('b'), sys('late'), user('c')]), 1)).toEqual([
      [1, 2],
      [2, 3],
      [3, 4],
    ]);
  });

  it('the only user input, first in the conversation, must be kept', () => {
    expect(validateCompaction(chat, [user('the task'), said('x'.repeat(300)), said('y')], [said('y')])).toEqual([
      'the last user input of the original is missing or changed',
    ]);
  });
});
