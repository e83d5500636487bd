import { describe, expect, it } from 'vitest';
import { breakpoints, messages, wireMessages } from '../../src/dialects/messages.js';

/*
 * The Messages dialect with literal results for the shapes Claude Code sends that the main table
 * does not cover: what the summarizer reads of each block, what a compaction may shorten, what
 * write() merges and strips, what problems() reports, and the summarizer wire.
 */

const cc = { type: 'ephemeral' };
const use = (id: string, extra: Record<string, unknown> = {}) => ({ type: 'tool_use', id, name: 'Read', input: { file_path: `/${id}` }, ...extra });
const answer = (id: string, content: unknown = 'ok', extra: Record<string, unknown> = {}) => ({ type: 'tool_result', tool_use_id: id, content, ...extra });
const text = (t: string, extra: Record<string, unknown> = {}) => ({ type: 'text', text: t, ...extra });

describe('null where a block should be (messages are checked on reading, their blocks are not)', () => {
  const withNull = {
    role: 'user',
    content: [null, answer('a', [null, text('inner', { cache_control: cc })]), text('t'.repeat(10), { cache_control: cc })],
  };

  it('is skipped by what the summarizer reads and by what a compaction may shorten', () => {
    expect(messages.render(withNull)).toEqual({ who: 'tool result a', text: 'inner\n' + 't'.repeat(10), calls: [] });
    expect(messages.slots(withNull).map((s) => s.path)).toEqual([
      ['content', 1, 'content', 1, 'text'],
      ['content', 2, 'text'],
    ]);
    expect(messages.slots({ role: 'assistant', content: [null, text('said')] })).toEqual([{ kind: 'text', path: ['content', 1, 'text'], text: 'said' }]);
  });

  it('is kept as it is when breakpoints are stripped around it', () => {
    const written = JSON.parse(messages.write({ messages: [] }, [withNull]).toString());
    expect(written.messages).toEqual([{ role: 'user', content: [null, answer('a', [null, text('inner')]), text('t'.repeat(10))] }]);
  });
});

describe('the API name', () => {
  it('is "messages": what the log, the metrics labels and the memory key say', () => {
    expect(messages.api).toBe('messages');
  });
});

describe('what the summarizer reads', () => {
  it('text blocks and tool results line by line; media as a marker; thinking, other blocks and non-blocks not at all', () => {
    const item = {
      role: 'user',
      content: [
        answer('a', [text('first'), { type: 'document', source: { type: 'base64', data: 'JVBER' } }]),
        answer('b', 'second'),
        'not a block',
        { type: 'text', text: 42 },
        { type: 'thinking', thinking: 'hidden', signature: 's' },
        { type: 'search_result', content: 'x' },
        { type: 'image', source: { type: 'url', url: 'https://e.x/a.png' } },
        text('third'),
      ],
    };
    expect(messages.render(item)).toEqual({ who: 'tool result a, b', text: 'first\n[document]\nsecond\n[image]\nthird', calls: [] });
    expect(messages.render({ role: 'assistant', content: 'plain string' })).toEqual({ who: 'assistant', text: 'plain string', calls: [] });
    expect(messages.render({ role: 'user', content: { type: 'text', text: 'not a list' } })).toEqual({ who: 'user', text: '', calls: [] });
  });

  it('server tool calls too; a call without input has "{}" for arguments, without a name "tool"; no role is "unknown"', () => {
    const item = {
      role: 'assistant',
      content: [
        { type: 'server_tool_use', id: 'srv', name: 'web_search', input: { query: 'q' } },
        { type: 'web_search_tool_result', tool_use_id: 'srv', content: [] },
        { type: 'tool_use', id: 'bare' },
        'junk',
      ],
    };
    expect(messages.render(item)).toEqual({
      who: 'assistant',
      text: '',
      calls: [
        { id: 'srv', name: 'web_search', args: '{"query":"q"}' },
        { id: 'bare', name: 'tool', args: '{}' },
      ],
    });
    expect(messages.render({ content: 'x' }).who).toBe('unknown');
    expect(messages.render('junk')).toEqual({ who: 'unknown', text: '', calls: [] });
  });

  it('what an item is when it is not a message, or answers nothing', () => {
    expect(messages.describe('junk')).toEqual({ role: 'user', calls: [], answers: [], joinsNext: false });
    expect(messages.describe({ role: 'user', content: [text('hi')] })).toEqual({ role: 'user', calls: [], answers: [], joinsNext: false });
    expect(messages.describe({ role: 'user', content: [answer('7')] }).answers).toEqual(['7']);
  });
});

describe('what a compaction may shorten', () => {
  it('nothing in what is not a message with content', () => {
    expect(messages.slots('junk')).toEqual([]);
    expect(messages.slots({ role: 'user' })).toEqual([]);
    expect(messages.slots({ role: 'user', content: { type: 'text', text: 'x' } })).toEqual([]);
  });

  it('the user\u2019s texts whatever else their message holds; blocks that are not records, or text sources that are not strings, are skipped', () => {
    const item = {
      role: 'user',
      content: [
        'junk',
        answer('a', ['junk', text('inner')]),
        answer('b', 42),
        { type: 'document', source: { type: 'text', data: 42 } },
        { type: 'document', source: 'nope' },
        { type: 'image', source: { type: 'text', data: 'not an image' } },
        { type: 'text', text: 7 },
        { type: 'thinking', thinking: 'x', signature: 's' },
        text('last'),
      ],
    };
    expect(messages.slots(item).map((s) => [s.kind, s.path])).toEqual([
      ['text', ['content', 1, 'content', 1, 'text']],
      ['text', ['content', 8, 'text']],
    ]);
  });

  it('an assistant message without thinking: its texts; with a thinking block anywhere: nothing', () => {
    const plain = { role: 'assistant', content: [text('a'.repeat(10)), use('x')] };
    expect(messages.slots(plain)).toEqual([{ kind: 'text', path: ['content', 0, 'text'], text: 'a'.repeat(10) }]);
    expect(messages.slots({ role: 'assistant', content: [text('b'), 'junk', { type: 'redacted_thinking', data: 'x' }] })).toEqual([]);
  });

  it('a base64 document is replaced whole, like an image', () => {
    const doc = { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBER' } };
    const [slot] = messages.slots({ role: 'user', content: [doc] });
    expect(slot).toMatchObject({ kind: 'image', path: ['content', 0], value: doc });
  });
});

describe('what write() sends', () => {
  it('an assistant run keeps the first message\u2019s other fields; string contents become text blocks; empty ones vanish', () => {
    const wire = wireMessages([
      { role: 'user', content: 'go' },
      { role: 'assistant', content: 'one', id: 'msg_1' },
      { role: 'assistant', content: '' },
      { role: 'assistant', content: [use('a')] },
      { role: 'user', content: [answer('a')] },
    ]);
    expect(wire).toEqual([
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [text('one'), use('a')], id: 'msg_1' },
      { role: 'user', content: [answer('a')] },
    ]);
  });

  it('a system entry first, or items without a role, are never merged into anything', () => {
    const sys = { role: 'system', content: 'env' };
    const odd = { content: 'no role' };
    const u1 = { role: 'user', content: 'a' };
    const u2 = { role: 'user', content: 'b' };
    const wire = wireMessages([sys, u1, odd, u2]);
    expect(wire).toEqual([sys, { role: 'user', content: [text('a'), text('b')] }, odd]);
    expect(wire[0]).toBe(sys);
    expect(wire[2]).toBe(odd);
  });

  it('a tool result content array with breakpoints inside counts them; a non-message counts none', () => {
    expect(breakpoints(['junk', { role: 'user', content: [answer('a', [text('x', { cache_control: cc }), 'y', text('z', { cache_control: cc })], { cache_control: cc })] }])).toBe(3);
    expect(breakpoints([{ role: 'user', content: [text('x', { cache_control: null })] }])).toBe(0);
  });

  it('strips extra breakpoints oldest first, inside tool results too, and leaves everything after as it was', () => {
    const later = { role: 'user', content: [answer('b', [text('y', { cache_control: cc })])] };
    const items = [
      { role: 'user', content: [text('a', { cache_control: cc }), answer('x', [text('in', { cache_control: cc })])] },
      { role: 'assistant', content: [use('b')] },
      later,
    ];
    const original = { model: 'm', messages: [{ role: 'user', content: [text('only', { cache_control: cc })] }] };
    const written = JSON.parse(messages.write(original, items).toString());
    expect(written.messages).toEqual([
      { role: 'user', content: [text('a'), answer('x', [text('in')])] },
      items[1],
      later,
    ]);
    // An original without a messages list counts as none: every breakpoint goes.
    expect(breakpoints(JSON.parse(messages.write({ model: 'm' }, items).toString()).messages)).toBe(0);
    // As many as the original had: nothing stripped.
    expect(JSON.parse(messages.write({ messages: items }, items).toString()).messages).toEqual(items);
  });
});

describe('breakpoints stripped one by one', () => {
  it('only as many as are over, even within one message', () => {
    const items = [{ role: 'user', content: [text('a', { cache_control: cc }), text('b', { cache_control: cc }), text('c', { cache_control: cc })] }];
    const original = { messages: [{ role: 'user', content: [text('x', { cache_control: cc }), text('y', { cache_control: cc })] }] };
    expect(JSON.parse(messages.write(original, items).toString()).messages).toEqual([
      { role: 'user', content: [text('a'), text('b', { cache_control: cc }), text('c', { cache_control: cc })] },
    ]);
  });
});

describe('what problems() reports', () => {
  it.each([
    ['only system entries', [{ role: 'system', content: 'x' }], []],
    ['a system entry before the first user turn', [{ role: 'system', content: 'x' }, { role: 'user', content: 'go' }], []],
    ['a tool result in an assistant message', [{ role: 'user', content: 'go' }, { role: 'assistant', content: [use('a')] }, { role: 'user', content: [answer('a')] }, { role: 'assistant', content: [answer('a')] }], [
      'the tool_result for "a" is not right after its tool_use',
    ]],
    ['a tool result after a system entry, its call two messages back', [{ role: 'user', content: 'go' }, { role: 'assistant', content: [use('a')] }, { role: 'system', content: 'x' }, { role: 'user', content: [answer('a')] }], [
      'the tool_use "a" is not answered in the next message',
      'the tool_result for "a" is not right after its tool_use',
    ]],
    ['a call left for the client to answer, as the last message', [{ role: 'user', content: 'go' }, { role: 'assistant', content: [use('a')] }], []],
    ['a call followed by something that is not a message', [{ role: 'user', content: 'go' }, { role: 'assistant', content: [use('a')] }, 'junk'], ['the tool_use "a" is not answered in the next message']],
    ['a result answering a non-string id', [{ role: 'user', content: 'go' }, { role: 'assistant', content: [use('5')] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 5 }] }], []],
    ['four breakpoints', [{ role: 'user', content: Array.from({ length: 4 }, () => text('t', { cache_control: cc })) }], []],
  ])('%s', (_name, items, found) => {
    expect(messages.problems(items as unknown[])).toEqual(found);
  });
});

describe('completion and stream events', () => {
  it('max_tokens below the thinking budget is refused; above it, or without a budget, it is set', () => {
    const request = { max_tokens: 64_000, thinking: { type: 'enabled', budget_tokens: 20_000 } };
    expect(JSON.parse(messages.withCompletion(request, 20_001)!.toString()).max_tokens).toBe(20_001);
    expect(messages.withCompletion(request, 19_999)).toBeNull();
    expect(JSON.parse(messages.withCompletion({ max_tokens: 10, thinking: 'on' }, 5)!.toString())).toEqual({ max_tokens: 5, thinking: 'on' });
    expect(messages.completion({ max_tokens: 0 })).toBeUndefined();
  });

  it('reads the event type from the start of the data only', () => {
    expect(messages.streamEvent!(undefined, '{ "type" :  "ping" }')).toBe('preamble');
    expect(messages.streamEvent!(undefined, `{"pad":"${'x'.repeat(200)}","type":"error"}`)).toBe('output');
    expect(messages.streamEvent!(undefined, `{"pad":"${'x'.repeat(170)}","type":"error"}`)).toBe('failure');
    expect(messages.streamEvent!('ping', '{"type":"error"}')).toBe('preamble');
  });
});

describe('the summarizer wire', () => {
  it('reads the text blocks of an answer, and nothing from anything else', () => {
    const wire = messages.summarizer;
    expect(wire.text({ content: ['junk', { type: 'text', text: 5 }, { type: 'tool_use', text: 'no' }, { type: 'text', text: 'yes' }] })).toBe('yes');
    expect(wire.text('junk')).toBeUndefined();
    expect(wire.text({ content: 'a string' })).toBeUndefined();
    expect(wire.credential).toBe('x-api-key');
  });

  it('keeps every OAuth beta flag, trimmed, and only those; a version that is not a string is replaced', () => {
    expect(messages.summarizer.headers({ 'anthropic-version': ['a', 'b'], 'anthropic-beta': ' oauth-a , x-1,oauth-b ' })).toEqual({
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'oauth-a,oauth-b',
    });
    expect(messages.summarizer.headers({ 'anthropic-beta': ['oauth-a'] })).toEqual({ 'anthropic-version': '2023-06-01' });
  });

  it('reads a request only when every message has a role', () => {
    expect(messages.read({ messages: [{ role: 'user', content: 'a' }, { content: 'b' }] })).toBeNull();
    expect(messages.read({ messages: [{ role: 'user', content: 'a' }, { role: 3 }] })).toBeNull();
    expect(messages.read({ messages: 'not a list' })).toBeNull();
  });
});
