import { describe, expect, it } from 'vitest';
import { breakpoints, messages, wireMessages } from '../../src/dialects/messages.js';

const b64 = { type: 'base64', media_type: 'image/png', data: 'A'.repeat(2000) };
const use = (id: string, extra: object[] = []) => ({ role: 'assistant', content: [...extra, { type: 'text', text: `calling ${id}` }, { type: 'tool_use', id, name: 'Read', input: { file_path: `/${id}` } }] });
const result = (id: string, content: unknown = 'file text') => ({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content }] });
const thinking = { type: 'thinking', thinking: 'Let me look.', signature: 'EqQBCkYIBxgCKkB' };
const redacted = { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix/LafPsn4aDFIT' };

describe('messages dialect: what each message is', () => {
  it.each([
    ['a system entry inside messages', { role: 'system', content: '# Environment' }, { role: 'instruction', calls: [], answers: [] }],
    ['a plain user message', { role: 'user', content: 'hi' }, { role: 'user', calls: [], answers: [] }],
    ['a user message answering tools', { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a' }, { type: 'tool_result', tool_use_id: 'b' }, { type: 'text', text: 'reminder' }] }, { role: 'tool', calls: [], answers: ['a', 'b'] }],
    ['an assistant message calling tools', { role: 'assistant', content: [thinking, { type: 'tool_use', id: 'x', name: 'Read', input: {} }, { type: 'tool_use', id: 'y', name: 'Bash', input: {} }] }, { role: 'assistant', calls: ['x', 'y'], answers: [] }],
    // paired inside the message: nothing for the planner to keep together across messages
    ['a server tool used and answered in one message', { role: 'assistant', content: [{ type: 'server_tool_use', id: 'srv', name: 'web_search', input: {} }, { type: 'web_search_tool_result', tool_use_id: 'srv', content: [] }] }, { role: 'assistant', calls: [], answers: [] }],
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
    expect(messages.render(use('a', [thinking]))).toEqual({ who: 'assistant', text: 'calling a', calls: [{ id: 'a', name: 'Read', args: '{"file_path":"/a"}' }] });
    expect(messages.render(result('a', [{ type: 'text', text: 'line 1' }, { type: 'image', source: b64 }]))).toEqual({ who: 'tool result a', text: 'line 1\n[image]', calls: [] });
  });
});

describe('messages dialect: what compaction may shorten', () => {
  it('no slot at all in an assistant message with thinking or redacted thinking (signed)', () => {
    const long = { type: 'text', text: 'x'.repeat(5000) };
    expect(messages.slots({ role: 'assistant', content: [thinking, long] })).toEqual([]);
    expect(messages.slots({ role: 'assistant', content: [redacted, long] })).toEqual([]);
    expect(messages.slots({ role: 'assistant', content: [long] })).toEqual([{ kind: 'text', path: ['content', 0, 'text'], text: long.text }]);
  });

  it('texts, tool results (string or blocks), plain-text documents; base64 media as a whole', () => {
    const item = {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'a', content: 'output' },
        { type: 'tool_result', tool_use_id: 'b', content: [{ type: 'text', text: 'shown' }, { type: 'image', source: b64 }] },
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
    const wire = wireMessages([use('a'), { role: 'user', content: 'plain' }, { role: 'user', content: [{ type: 'text', text: 'more' }, { type: 'tool_result', tool_use_id: 'a', content: 'x' }] }]);
    expect(wire[1]).toEqual({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 'x' }, { type: 'text', text: 'plain' }, { type: 'text', text: 'more' }] });
    expect(wireMessages([{ role: 'user', content: 'a' }, { role: 'user', content: '' }])).toEqual([{ role: 'user', content: [{ type: 'text', text: 'a' }] }]);
  });

  it('merges a whole run of same-role turns into its first, blocks in order', () => {
    const said = (text: string) => ({ role: 'assistant', content: text });
    const wire = wireMessages([task, said('one'), env, said('two'), said('three'), result('x')]);
    expect(wire).toEqual([task, { role: 'assistant', content: ['one', 'two', 'three'].map((text) => ({ type: 'text', text })) }, env, result('x')]);
  });

  it('write() replaces messages merged, every other field as sent and in its place', () => {
    const request = { model: 'm', system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }], messages: [task], max_tokens: 10, unknown_field: { x: 1 } };
    const written = JSON.parse(messages.write(request, [task, env, summary, use('a'), result('a')]).toString());
    expect(Object.keys(written)).toEqual(Object.keys(request));
    expect({ ...written, messages: undefined }).toEqual({ ...request, messages: undefined });
    expect(written.messages.map((m: any) => m.role)).toEqual(['user', 'system', 'assistant', 'user']);
  });

  it('write() never sends more cache_control breakpoints than the original had: the oldest extra ones go', () => {
    const cc = { type: 'ephemeral' };
    const original = { messages: [task, use('a'), { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 'x', cache_control: cc }] }] };
    const marked = (id: string) => ({ role: 'user', content: [{ type: 'text', text: id, cache_control: cc }] });
    const items = [marked('one'), use('a'), { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 'x', cache_control: cc }] }, use('b'), { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'b', content: [{ type: 'text', text: 'y', cache_control: cc }] }] }];
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
    ['a tool result whose call is not right before it', [task, use('a'), result('a'), { role: 'assistant', content: 'ok' }, result('a')], ['the tool_result for "a" is not right after its tool_use']],
    ['a tool call not answered in the next message', [task, use('a'), { role: 'user', content: 'hm' }], ['the tool_use "a" is not answered in the next message']],
    ['a tool result after other content', [task, use('a'), { role: 'user', content: [{ type: 'text', text: 'first' }, { type: 'tool_result', tool_use_id: 'a' }] }], ['the tool_result for "a" is not at the start of its message']],
    ['five breakpoints', [{ role: 'user', content: Array.from({ length: 5 }, () => ({ type: 'text', text: 't', cache_control: { type: 'ephemeral' } })) }], ['more than 4 cache_control breakpoints']],
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
    expect(wire.body({ model: 'claude', instructions: 'summarise', transcript: 'T', maxTokens: 900, request: { stream: true, thinking: {} } })).toEqual({
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
