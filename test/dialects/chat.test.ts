import { describe, expect, it } from 'vitest';
import { chat } from '../../src/dialects/chat.js';

/*
 * The chat completions dialect, method by method: what the rescue core is told about each message,
 * and what goes back on the wire.
 */

const json = (b: Buffer | null) => JSON.parse(b!.toString('utf8'));

describe('chat.read', () => {
  it('reads messages, one entry per message', () => {
    const messages = [
      { role: 'system', content: 's' },
      { role: 'user', content: 'u' },
    ];
    const conversation = chat.read({ model: 'm', messages });
    expect(conversation!.items).toBe(messages);
    expect(conversation!.entries.map((e) => e.role)).toEqual(['instruction', 'user']);
  });

  it.each([
    ['no messages', { model: 'm' }],
    ['messages not an array', { messages: { role: 'user' } }],
    ['an empty list', { messages: [] }],
    ['a message that is not an object', { messages: [{ role: 'user', content: 'x' }, 'hello'] }],
    ['a message with no role', { messages: [{ role: 'user', content: 'x' }, { content: 'y' }] }],
    ['a role that is not a string', { messages: [{ role: 7, content: 'x' }] }],
  ])('has nothing to compact with %s', (_name, request) => {
    expect(chat.read(request as Record<string, unknown>)).toBeNull();
  });
});

describe('chat.describe', () => {
  it('an assistant message issues its tool calls by id', () => {
    const entry = chat.describe({ role: 'assistant', tool_calls: [{ id: 'a' }, { id: 'b' }], content: null });
    expect(entry).toEqual({ role: 'assistant', calls: ['a', 'b'], answers: [], joinsNext: false });
  });

  it('a tool message answers its tool_call_id', () => {
    expect(chat.describe({ role: 'tool', tool_call_id: 'a', content: 'ok' })).toEqual({
      role: 'tool',
      calls: [],
      answers: ['a'],
      joinsNext: false,
    });
  });

  it('a legacy function message is a tool result that answers no id', () => {
    expect(chat.describe({ role: 'function', name: 'f', content: 'ok' })).toEqual({
      role: 'tool',
      calls: [],
      answers: [],
      joinsNext: false,
    });
  });

  it('system and developer messages are instructions; user is user; anything else is the assistant', () => {
    expect(chat.describe({ role: 'system' })).toEqual({ role: 'instruction', calls: [], answers: [], joinsNext: false });
    expect(chat.describe({ role: 'developer', tool_calls: [{ id: 'x' }] })).toEqual({
      role: 'instruction',
      calls: [],
      answers: [],
      joinsNext: false,
    });
    expect(chat.describe({ role: 'user' }).role).toBe('user');
    expect(chat.describe({ role: 'assistant' }).role).toBe('assistant');
    expect(chat.describe({ role: 'critic' }).role).toBe('assistant');
    expect(chat.describe('not a message')).toEqual({ role: 'assistant', calls: [], answers: [], joinsNext: false });
  });

  it('only an assistant message issues calls, and odd call entries keep a usable id', () => {
    expect(chat.describe({ role: 'user', tool_calls: [{ id: 'x' }] }).calls).toEqual([]);
    expect(chat.describe({ role: 'assistant', tool_calls: 'x' }).calls).toEqual([]);
    expect(chat.describe({ role: 'assistant', tool_calls: ['raw'] }).calls).toEqual(['raw']);
  });
});

describe('chat.render', () => {
  it('names the speaker, with the name when the message has one', () => {
    expect(chat.render({ role: 'user', content: 'hi' })).toEqual({ who: 'user', text: 'hi', calls: [] });
    expect(chat.render({ role: 'user', name: 'ann', content: 'hi' })).toEqual({ who: 'user (ann)', text: 'hi', calls: [] });
    expect(chat.render({ content: 'x' }).who).toBe('unknown');
    expect(chat.render(null)).toEqual({ who: 'unknown', text: '', calls: [] });
  });

  it('a tool result names the call it answers', () => {
    expect(chat.render({ role: 'tool', tool_call_id: 'c1', content: 'out' })).toEqual({ who: 'tool result c1', text: 'out', calls: [] });
    expect(chat.render({ role: 'tool', content: 'out' }).who).toBe('tool result');
  });

  it('lists the tool calls with their names and arguments, defaults for missing ones', () => {
    const rendered = chat.render({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', function: { name: 'grep', arguments: '{"q":1}' } }, { id: 'c2' }, 'junk'],
    });
    expect(rendered).toEqual({
      who: 'assistant',
      text: '',
      calls: [
        { id: 'c1', name: 'grep', args: '{"q":1}' },
        { id: 'c2', name: 'tool', args: '' },
      ],
    });
  });
});

describe('chat.slots', () => {
  it('a string content is one text slot', () => {
    expect(chat.slots({ role: 'tool', content: 'abc' })).toEqual([{ kind: 'text', path: ['content'], text: 'abc' }]);
  });

  it('text parts and inline images of a parts array, by their path; short links and others are not slots', () => {
    const data = 'data:image/png;base64,AAAA';
    const slots = chat.slots({
      role: 'user',
      content: [
        { type: 'text', text: 'look' },
        { type: 'image_url', image_url: { url: data } },
        { type: 'image_url', image_url: { url: 'https://x/y.png' } },
        { type: 'input_image', image_url: data },
        { type: 'image', source: { data } },
        { type: 'audio', data },
        'loose string',
        null,
      ],
    });
    expect(slots.map((s) => [s.kind, s.path])).toEqual([
      ['text', ['content', 0, 'text']],
      ['image', ['content', 1]],
      ['image', ['content', 3]],
      ['image', ['content', 4]],
    ]);
    const image = slots[1] as Extract<(typeof slots)[number], { kind: 'image' }>;
    expect(image.value).toEqual({ type: 'image_url', image_url: { url: data } });
    expect(image.placeholder('[image removed]')).toEqual({ type: 'text', text: '[image removed]' });
  });

  it('nothing to shorten without content', () => {
    expect(chat.slots({ role: 'assistant', content: null })).toEqual([]);
    expect(chat.slots('x')).toEqual([]);
    expect(chat.slots(null)).toEqual([]);
  });
});

describe('chat.write, summaryItem, completion', () => {
  it('writes the messages back, every other field as sent and in its place', () => {
    const body = chat.write({ model: 'm', messages: [], stream: true }, [{ role: 'user', content: 'x' }]);
    expect(body.toString()).toBe('{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}');
  });

  it('a summary is a message with the given role', () => {
    expect(chat.summaryItem('sum', 'user')).toEqual({ role: 'user', content: 'sum' });
    expect(chat.summaryItem('sum', 'system')).toEqual({ role: 'system', content: 'sum' });
  });

  it('reads max_completion_tokens first, then max_tokens, positive integers only', () => {
    expect(chat.completion({ max_completion_tokens: 100, max_tokens: 50 })).toBe(100);
    expect(chat.completion({ max_tokens: 50 })).toBe(50);
    expect(chat.completion({ max_completion_tokens: 0, max_tokens: 50 })).toBe(50);
    expect(chat.completion({ max_tokens: 1.5 })).toBeUndefined();
    expect(chat.completion({ max_tokens: '50' })).toBeUndefined();
    expect(chat.completion({})).toBeUndefined();
  });

  it('lowers the field the request used, keeping the key order', () => {
    expect(chat.withCompletion({ model: 'm', max_completion_tokens: 100, n: 1 }, 10)!.toString()).toBe(
      '{"model":"m","max_completion_tokens":10,"n":1}',
    );
    expect(chat.withCompletion({ model: 'm', max_tokens: 100 }, 10)!.toString()).toBe('{"model":"m","max_tokens":10}');
    expect(json(chat.withCompletion({ model: 'm' }, 10))).toEqual({ model: 'm', max_tokens: 10 });
  });

  it('has no wire problems, no stream preamble and no server-side rescue', () => {
    expect(chat.api).toBe('chat');
    expect(chat.problems([{ role: 'user' }, { role: 'user' }])).toEqual([]);
    expect(chat.streamEvent).toBeNull();
    expect(chat.serverSideRescue({ messages: [] })).toBeNull();
  });
});

describe('chat.summarizer', () => {
  it('asks /chat/completions with the instructions as system and the transcript as user', () => {
    const body = chat.summarizer.body({ model: 'sm', instructions: 'I', transcript: 'T', maxTokens: 300, request: { max_tokens: 5 } });
    expect(chat.summarizer.path('m')).toBe('/chat/completions');
    expect(body).toEqual({
      model: 'sm',
      messages: [
        { role: 'system', content: 'I' },
        { role: 'user', content: 'T' },
      ],
      max_tokens: 300,
      stream: false,
    });
    const newer = chat.summarizer.body({
      model: 'sm',
      instructions: 'I',
      transcript: 'T',
      maxTokens: 300,
      request: { max_completion_tokens: 5 },
    });
    expect(newer).toMatchObject({ max_completion_tokens: 300 });
    expect(newer).not.toHaveProperty('max_tokens');
  });

  it('reads the first choice’s message content', () => {
    expect(chat.summarizer.text({ choices: [{ message: { content: 'S' } }, { message: { content: 'T' } }] })).toBe('S');
    expect(chat.summarizer.text({ choices: [{ message: { content: null } }] })).toBeUndefined();
    expect(chat.summarizer.text({ choices: [] })).toBeUndefined();
    expect(chat.summarizer.text({ choices: 'x' })).toBeUndefined();
    expect(chat.summarizer.text({ choices: [{}] })).toBeUndefined();
    expect(chat.summarizer.text('x')).toBeUndefined();
    expect(chat.summarizer.text(null)).toBeUndefined();
    expect(chat.summarizer.headers({ authorization: 'Bearer k' })).toEqual({});
  });
});
