import { describe, expect, it } from 'vitest';
import { breakpoints, messages, wireMessages } from '../../src/dialects/messages.js';

const b64 = { type: 'base64', media_type: 'image/png', data: 'A'.repeat(2000) };
const use = (id: string, extra: object[] = []) => ({
  role: 'assistant',
  content: [...extra, { type: 'text', text: `calling ${id}` }, { type: 'tool_use', id, name: 'Read', input: { file_path: `/${id}` } }],
});
const result = (id: string, content: unknown = 'file text') => ({
  role: 'user',
  content: [{ type: 'tool_result', tool_use_id: id, content }],
});
const thinking = { type: 'thinking', thinking: 'Let me look.', signature: 'EqQBCkYIBxgCKkB' };
const redacted = { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix/LafPsn4aDFIT' };

describe('messages dialect: what each message is', () => {
  it.each([
    ['a system entry inside messages', { role: 'system', content: '# Environment' }, { role: 'instruction', calls: [], answers: [] }],
    ['a plain user message', { role: 'user', content: 'hi' }, { role: 'user', calls: [], answers: [] }],
    [
      'a user message answering tools',
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'a' },
          { type: 'tool_result', tool_use_id: 'b' },
          { type: 'text', text: 'reminder' },
        ],
      },
      { role: 'tool', calls: [], answers: ['a', 'b'] },
    ],
    [
      'an assistant message calling tools',
      {
        role: 'assistant',
        content: [thinking, { type: 'tool_use', id: 'x', name: 'Read', input: {} }, { type: 'tool_use', id: 'y', name: 'Bash', input: {} }],
      },
      { role: 'assistant', calls: ['x', 'y'], answers: [] },
    ],
    // paired inside the message: nothing for the planner to keep together across messages
    [
      'a server tool used and answered in one message',
      {
        role: 'assistant',
        content: [
          { type: 'server_tool_use', id: 'srv', name: 'web_search', input: {} },
          { type: 'web_search_tool_result', tool_use_id: 'srv', content: [] },
        ],
      },
      { role: 'assistant', calls: [], answers: [] },
    ],
  ])('%s', (_name, item, entry) => {
    expect(messages.describe(item)).toEqual({ ...entry, joinsNext: false });
  });

  it('reads `messages`, and nothing when it is missing, empty or not made of messages', () => {
    const request = { model: 'm', system: 's', messages: [{ role: 'user', content: 'hi' }, use('a'), result('a')] };
    expect(messages.read(request)).toEqual({ items: request.messages, entries: request.messages.map(messages.describe) });
    expect(messages.read({ messages: [] })).toBeNull();
    expect(messages.read({ prompt: 'x' })).toBeNull();
    expect(messages.read({ messages: ['hi'] })).toBeNull();
  });

  it('renders calls and results for the summarizer, never the thinking', () => {
    expect(messages.render(use('a', [thinking]))).toEqual({
      who: 'assistant',
      text: 'calling a',
      calls: [{ id: 'a', name: 'Read', args: '{"file_path":"/a"}' }],
    });
    expect(
      messages.render(
        result('a', [
          { type: 'text', text: 'line 1' },
          { type: 'image', source: b64 },
        ]),
      ),
    ).toEqual({ who: 'tool result a', text: 'line 1\n[image]', calls: [] });
  });
});

describe('messages dialect: what compaction may shorten', () => {
  it('no slot at all in an assistant message with thinking or redacted thinking (signed)', () => {
    const long = { type: 'text', text: 'x'.repeat(5000) };
    expect(messages.slots({ role: 'assistant', content: [thinking, long] })).toEqual([]);
    expect(messages.slots({ role: 'assistant', content: [redacted, long] })).toEqual([]);
    expect(messages.slots({ role: 'assistant', content: [long] })).toEqual([
      { kind: 'text', path: ['content', 0, 'text'], text: long.text },
    ]);
  });

  it('texts, tool results (string or blocks), plain-text documents; base64 media as a whole', () => {
    const item = {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'a', content: 'output' },
        {
          type: 'tool_result',
          tool_use_id: 'b',
          content: [
            { type: 'text', text: 'shown' },
            { type: 'image', source: b64 },
          ],
        },
        { type: 'text', text: 'note' },
        { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } },
        { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBER' } },
        { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'plain doc' } },
      ],
    };
    const slots = messages.slots(item);
    expect(slots.map((s) => [s.kind, s.path])).toEqual([
      ['text', ['content', 0, 'content']],
      ['text', ['content', 1, 'content', 0, 'text']],
      ['image', ['content', 1, 'content', 1]],
      ['text', ['content', 2, 'text']],
      ['image', ['content', 4]],
      ['text', ['content', 5, 'source', 'data']],
    ]);
    const image = slots[2] as Extract<(typeof slots)[number], { kind: 'image' }>;
    expect(image.placeholder('[image omitted]')).toEqual({ type: 'text', text: '[image omitted]' });
    expect(messages.slots({ role: 'user', content: 'just text' })).toEqual([{ kind: 'text', path: ['content'], text: 'just text' }]);
  });
});

describe('messages dialect: what goes on the wire', () => {
  const task = { role: 'user', content: [{ type: 'text', text: 'Review src/' }] };
  const env = { role: 'system', content: '# Environment' };
  const summary = messages.summaryItem('SUMMARY', 'system') as { role: string; content: Array<{ type: string; text: string }> };

  it('the summary is always a user turn, whatever role is configured', () => {
    expect(summary).toEqual({ role: 'user', content: [{ type: 'text', text: 'SUMMARY' }] });
  });

  it('merges the summary into the user turn before it, across a system entry; other messages stay the same objects', () => {
    const a = use('a', [thinking]);
    const r = result('a');
    const wire = wireMessages([task, env, summary, a, r]);
    expect(wire).toEqual([{ role: 'user', content: [task.content[0], summary.content[0]] }, env, a, r]);
    expect(wire[1]).toBe(env);
    expect(wire[2]).toBe(a);
    expect(wire[3]).toBe(r);
  });

  it('turns string content into a text block, and keeps tool results first in a merged user turn', () => {
    const wire = wireMessages([
      use('a'),
      { role: 'user', content: 'plain' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'more' },
          { type: 'tool_result', tool_use_id: 'a', content: 'x' },
        ],
      },
    ]);
    expect(wire[1]).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'a', content: 'x' },
        { type: 'text', text: 'plain' },
        { type: 'text', text: 'more' },
      ],
    });
    expect(
      wireMessages([
        { role: 'user', content: 'a' },
        { role: 'user', content: '' },
      ]),
    ).toEqual([{ role: 'user', content: [{ type: 'text', text: 'a' }] }]);
  });

  it('merges a whole run of same-role turns into its first, blocks in order', () => {
    const said = (text: string) => ({ role: 'assistant', content: text });
    const wire = wireMessages([task, said('one'), env, said('two'), said('three'), result('x')]);
    expect(wire).toEqual([
      task,
      { role: 'assistant', content: ['one', 'two', 'three'].map((text) => ({ type: 'text', text })) },
      env,
      result('x'),
    ]);
  });

  it('write() replaces messages merged, every other field as sent and in its place', () => {
    const request = {
      model: 'm',
      system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }],
      messages: [task],
      max_tokens: 10,
      unknown_field: { x: 1 },
    };
    const written = JSON.parse(messages.write(request, [task, env, summary, use('a'), result('a')]).toString());
    expect(Object.keys(written)).toEqual(Object.keys(request));
    expect({ ...written, messages: undefined }).toEqual({ ...request, messages: undefined });
    expect(written.messages.map((m: any) => m.role)).toEqual(['user', 'system', 'assistant', 'user']);
  });

  it('write() never sends more cache_control breakpoints than the original had: the oldest extra ones go', () => {
    const cc = { type: 'ephemeral' };
    const original = {
      messages: [task, use('a'), { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 'x', cache_control: cc }] }],
    };
    const marked = (id: string) => ({ role: 'user', content: [{ type: 'text', text: id, cache_control: cc }] });
    const items = [
      marked('one'),
      use('a'),
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 'x', cache_control: cc }] },
      use('b'),
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'b', content: [{ type: 'text', text: 'y', cache_control: cc }] }] },
    ];
    expect(breakpoints(items)).toBe(3);
    const written = JSON.parse(messages.write(original, items).toString());
    expect(breakpoints(written.messages)).toBe(1);
    // the newest one is kept
    expect(written.messages[4].content[0].content[0].cache_control).toEqual(cc);
  });

  it.each([
    ['a valid conversation', [task, env, use('a', [thinking]), result('a')], []],
    ['a summary next to a user turn (write() merges it)', [task, env, summary, use('a'), result('a')], []],
    ['an assistant turn first', [use('a'), result('a')], ['the first turn is not a user turn']],
    [
      'a tool result whose call is not right before it',
      [task, use('a'), result('a'), { role: 'assistant', content: 'ok' }, result('a')],
      ['the tool_result for "a" is not right after its tool_use'],
    ],
    [
      'a tool call not answered in the next message',
      [task, use('a'), { role: 'user', content: 'hm' }],
      ['the tool_use "a" is not answered in the next message'],
    ],
    [
      'a tool result after other content',
      [
        task,
        use('a'),
        {
          role: 'user',
          content: [
            { type: 'text', text: 'first' },
            { type: 'tool_result', tool_use_id: 'a' },
          ],
        },
      ],
      ['the tool_result for "a" is not at the start of its message'],
    ],
    [
      'five breakpoints',
      [{ role: 'user', content: Array.from({ length: 5 }, () => ({ type: 'text', text: 't', cache_control: { type: 'ephemeral' } })) }],
      ['more than 4 cache_control breakpoints'],
    ],
  ])('problems: %s', (_name, items, found) => {
    expect(messages.problems(items)).toEqual(found);
  });
});

describe('messages dialect: completion, stream events, summarizer', () => {
  it('lowers max_tokens, but not below the thinking budget', () => {
    const request = { model: 'm', max_tokens: 64_000, thinking: { type: 'enabled', budget_tokens: 20_000 }, messages: [] };
    expect(messages.completion(request)).toBe(64_000);
    expect(JSON.parse(messages.withCompletion(request, 30_000)!.toString())).toEqual({ ...request, max_tokens: 30_000 });
    expect(messages.withCompletion(request, 20_000)).toBeNull();
    expect(JSON.parse(messages.withCompletion({ max_tokens: 9, thinking: { type: 'adaptive' } }, 5)!.toString()).max_tokens).toBe(5);
  });

  it.each([
    ['message_start', '{"type":"message_start","message":{}}', 'preamble'],
    ['ping', '{"type": "ping"}', 'preamble'],
    ['error', '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}', 'failure'],
    ['content_block_start', '{"type":"content_block_start","index":0}', 'output'],
    [undefined, '{"type":"message_start","message":{}}', 'preamble'],
    [undefined, '{"type":"error","error":{}}', 'failure'],
    [undefined, '{"type":"content_block_delta"}', 'output'],
  ])('stream event %s %s is %s', (name, data, kind) => {
    expect(messages.streamEvent!(name, data)).toBe(kind);
  });

  it('calls the summarizer in the Messages API with the request anthropic-version', () => {
    const wire = messages.summarizer;
    expect(wire.path('m')).toBe('/messages');
    expect(
      wire.body({ model: 'claude', instructions: 'summarise', transcript: 'T', maxTokens: 900, request: { stream: true, thinking: {} } }),
    ).toEqual({
      model: 'claude',
      system: 'summarise',
      messages: [{ role: 'user', content: 'T' }],
      max_tokens: 900,
    });
    expect(wire.text({ content: [thinking, { type: 'text', text: 'one' }, { type: 'text', text: 'two' }] })).toBe('one\ntwo');
    expect(wire.text({ content: [] })).toBeUndefined();
    expect(wire.headers({ 'anthropic-version': '2024-01-01', 'anthropic-beta': 'x' })).toEqual({ 'anthropic-version': '2024-01-01' });
    expect(wire.headers({})).toEqual({ 'anthropic-version': '2023-06-01' });
    // Claude Code signed in with OAuth: the token needs its beta flag, the rest is the request's business.
    expect(wire.headers({ 'anthropic-beta': 'claude-code-20250219, oauth-2025-04-20,context-management-2025-06-27' })).toEqual({
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'oauth-2025-04-20',
    });
    expect(messages.serverSideRescue({ messages: [] })).toBeNull();
  });
});

describe('messages dialect: the shapes Claude Code sends beyond the tables above', () => {
  /*
   * The Messages dialect with literal results for the shapes Claude Code sends that the main table
   * does not cover: what the summarizer reads of each block, what a compaction may shorten, what
   * write() merges and strips, what problems() reports, and the summarizer wire.
   */

  const cc = { type: 'ephemeral' };
  const use = (id: string, extra: Record<string, unknown> = {}) => ({
    type: 'tool_use',
    id,
    name: 'Read',
    input: { file_path: `/${id}` },
    ...extra,
  });
  const answer = (id: string, content: unknown = 'ok', extra: Record<string, unknown> = {}) => ({
    type: 'tool_result',
    tool_use_id: id,
    content,
    ...extra,
  });
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
      expect(messages.slots({ role: 'assistant', content: [null, text('said')] })).toEqual([
        { kind: 'text', path: ['content', 1, 'text'], text: 'said' },
      ]);
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
      expect(messages.render({ role: 'assistant', content: 'plain string' })).toEqual({
        who: 'assistant',
        text: 'plain string',
        calls: [],
      });
      expect(messages.render({ role: 'user', content: { type: 'text', text: 'not a list' } })).toEqual({
        who: 'user',
        text: '',
        calls: [],
      });
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
      expect(messages.describe({ role: 'user', content: [text('hi')] })).toEqual({
        role: 'user',
        calls: [],
        answers: [],
        joinsNext: false,
      });
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
      expect(
        breakpoints([
          'junk',
          {
            role: 'user',
            content: [answer('a', [text('x', { cache_control: cc }), 'y', text('z', { cache_control: cc })], { cache_control: cc })],
          },
        ]),
      ).toBe(3);
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
      expect(written.messages).toEqual([{ role: 'user', content: [text('a'), answer('x', [text('in')])] }, items[1], later]);
      // An original without a messages list counts as none: every breakpoint goes.
      expect(breakpoints(JSON.parse(messages.write({ model: 'm' }, items).toString()).messages)).toBe(0);
      // As many as the original had: nothing stripped.
      expect(JSON.parse(messages.write({ messages: items }, items).toString()).messages).toEqual(items);
    });
  });

  describe('breakpoints stripped one by one', () => {
    it('only as many as are over, even within one message', () => {
      const items = [
        { role: 'user', content: [text('a', { cache_control: cc }), text('b', { cache_control: cc }), text('c', { cache_control: cc })] },
      ];
      const original = { messages: [{ role: 'user', content: [text('x', { cache_control: cc }), text('y', { cache_control: cc })] }] };
      expect(JSON.parse(messages.write(original, items).toString()).messages).toEqual([
        { role: 'user', content: [text('a'), text('b', { cache_control: cc }), text('c', { cache_control: cc })] },
      ]);
    });
  });

  describe('what problems() reports', () => {
    it.each([
      ['only system entries', [{ role: 'system', content: 'x' }], []],
      [
        'a system entry before the first user turn',
        [
          { role: 'system', content: 'x' },
          { role: 'user', content: 'go' },
        ],
        [],
      ],
      [
        'a tool result in an assistant message',
        [
          { role: 'user', content: 'go' },
          { role: 'assistant', content: [use('a')] },
          { role: 'user', content: [answer('a')] },
          { role: 'assistant', content: [answer('a')] },
        ],
        ['the tool_result for "a" is not right after its tool_use'],
      ],
      [
        'a tool result after a system entry, its call two messages back',
        [
          { role: 'user', content: 'go' },
          { role: 'assistant', content: [use('a')] },
          { role: 'system', content: 'x' },
          { role: 'user', content: [answer('a')] },
        ],
        ['the tool_use "a" is not answered in the next message', 'the tool_result for "a" is not right after its tool_use'],
      ],
      [
        'a call left for the client to answer, as the last message',
        [
          { role: 'user', content: 'go' },
          { role: 'assistant', content: [use('a')] },
        ],
        [],
      ],
      [
        'a call followed by something that is not a message',
        [{ role: 'user', content: 'go' }, { role: 'assistant', content: [use('a')] }, 'junk'],
        ['the tool_use "a" is not answered in the next message'],
      ],
      [
        'a result answering a non-string id',
        [
          { role: 'user', content: 'go' },
          { role: 'assistant', content: [use('5')] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 5 }] },
        ],
        [],
      ],
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
      expect(JSON.parse(messages.withCompletion({ max_tokens: 10, thinking: 'on' }, 5)!.toString())).toEqual({
        max_tokens: 5,
        thinking: 'on',
      });
      expect(messages.completion({ max_tokens: 0 })).toBeUndefined();
    });

    it('reads the event type from the event name, else from the data (spaces allowed, after another field too)', () => {
      expect(messages.streamEvent!(undefined, '{ "type" :  "ping" }')).toBe('preamble');
      expect(messages.streamEvent!(undefined, `{"pad":"${'x'.repeat(170)}","type":"error"}`)).toBe('failure');
      expect(messages.streamEvent!('ping', '{"type":"error"}')).toBe('preamble');
    });
  });

  describe('the summarizer wire', () => {
    it('reads the text blocks of an answer, and nothing from anything else', () => {
      const wire = messages.summarizer;
      expect(
        wire.text({ content: ['junk', { type: 'text', text: 5 }, { type: 'tool_use', text: 'no' }, { type: 'text', text: 'yes' }] }),
      ).toBe('yes');
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
});
