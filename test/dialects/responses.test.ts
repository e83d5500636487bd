import { describe, expect, it } from 'vitest';
import { responses } from '../../src/dialects/responses.js';

/*
 * The Responses API dialect, method by method: items and their pairing, the provider's opaque
 * state, stream events, and the one rescue left when the history is held upstream.
 */

const entry = (role: string, calls: string[] = [], answers: string[] = [], joinsNext = false) => ({ role, calls, answers, joinsNext });

describe('responses.read', () => {
  it('reads a list of items, one entry per item', () => {
    const input = [
      { type: 'message', role: 'developer', content: 'rules' },
      { role: 'user', content: 'task' },
      { type: 'function_call', call_id: 'c1', name: 'sh', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: 'ok' },
    ];
    const conversation = responses.read({ model: 'm', input });
    expect(conversation!.items).toBe(input);
    expect(conversation!.entries).toEqual([entry('instruction'), entry('user'), entry('assistant', ['c1']), entry('tool', [], ['c1'])]);
  });

  it('a string input is one user message, written back as a list', () => {
    const conversation = responses.read({ input: 'hello' });
    expect(conversation).toEqual({ items: [{ type: 'message', role: 'user', content: 'hello' }], entries: [entry('user')] });
  });

  it.each([
    ['previous_response_id', { previous_response_id: 'resp_1', input: [{ role: 'user', content: 'x' }] }],
    ['an empty string', { input: '' }],
    ['no input', { model: 'm' }],
    ['an empty list', { input: [] }],
    ['an item that is not an object', { input: [{ role: 'user', content: 'x' }, 'y'] }],
    ['an item that is a list', { input: [[{ role: 'user' }]] }],
  ])('has nothing to compact with %s', (_name, request) => {
    expect(responses.read(request as Record<string, unknown>)).toBeNull();
  });
});

describe('responses.describe', () => {
  it('reasoning joins the item after it; other provider state is opaque on its own', () => {
    expect(responses.describe({ type: 'reasoning', encrypted_content: 'gAAA' })).toEqual(entry('opaque', [], [], true));
    expect(responses.describe({ type: 'compaction', encrypted_content: 'x' })).toEqual(entry('opaque'));
    expect(responses.describe({ type: 'compaction_summary' })).toEqual(entry('opaque'));
    expect(responses.describe({ type: 'item_reference', id: 'msg_1' })).toEqual(entry('opaque'));
  });

  it('every *_call issues its call_id (else its id), every *_call_output answers it', () => {
    expect(responses.describe({ type: 'custom_tool_call', call_id: 'c2' })).toEqual(entry('assistant', ['c2']));
    expect(responses.describe({ type: 'local_shell_call', id: 'ls1' })).toEqual(entry('assistant', ['ls1']));
    expect(responses.describe({ type: 'custom_tool_call_output', call_id: 'c2' })).toEqual(entry('tool', [], ['c2']));
    expect(responses.describe({ type: 'local_shell_call_output', id: 'ls1' })).toEqual(entry('tool', [], ['ls1']));
  });

  it('messages by role: system and developer are instructions, user is user, the rest the assistant', () => {
    expect(responses.describe({ type: 'message', role: 'system' })).toEqual(entry('instruction'));
    expect(responses.describe({ role: 'developer' })).toEqual(entry('instruction'));
    expect(responses.describe({ type: 'message', role: 'user' })).toEqual(entry('user'));
    expect(responses.describe({ type: 'message', role: 'assistant' })).toEqual(entry('assistant'));
    expect(responses.describe({ type: 'web_search' })).toEqual(entry('assistant'));
    expect(responses.describe(null)).toEqual(entry('assistant'));
  });
});

describe('responses.render', () => {
  it('a message is its role and its texts', () => {
    expect(
      responses.render({
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'a' },
          { type: 'input_text', text: 'b' },
        ],
      }),
    ).toEqual({
      who: 'user',
      text: 'a\nb',
      calls: [],
    });
    expect(responses.render({ type: 'message', content: 'x' }).who).toBe('unknown');
  });

  it('a function or custom tool call is a named call with its arguments or input', () => {
    expect(responses.render({ type: 'function_call', call_id: 'c1', name: 'sh', arguments: '{"cmd":"ls"}' })).toEqual({
      who: 'assistant',
      text: '',
      calls: [{ id: 'c1', name: 'sh', args: '{"cmd":"ls"}' }],
    });
    expect(responses.render({ type: 'custom_tool_call', call_id: 'c2', name: 'apply_patch', input: '*** Begin Patch' }).calls).toEqual([
      { id: 'c2', name: 'apply_patch', args: '*** Begin Patch' },
    ]);
    expect(responses.render({ type: 'function_call', id: 'c3' }).calls).toEqual([{ id: 'c3', name: 'tool', args: '' }]);
  });

  it('other calls are named by their type, with their action as JSON', () => {
    expect(responses.render({ type: 'local_shell_call', call_id: 'l1', action: { type: 'exec', command: ['ls'] } })).toEqual({
      who: 'assistant',
      text: '',
      calls: [{ id: 'l1', name: 'local_shell', args: '{"type":"exec","command":["ls"]}' }],
    });
    expect(responses.render({ type: 'web_search_call', id: 'w1', arguments: 'q=x' }).calls).toEqual([
      { id: 'w1', name: 'web_search', args: 'q=x' },
    ]);
    expect(responses.render({ type: 'mcp_call', id: 'm1', input: 'in' }).calls[0].args).toBe('in');
    expect(responses.render({ type: 'file_search_call', id: 'f1' }).calls[0].args).toBe('');
  });

  it('a call output names the call, its output a string or parts', () => {
    expect(responses.render({ type: 'function_call_output', call_id: 'c1', output: 'done' })).toEqual({
      who: 'tool result c1',
      text: 'done',
      calls: [],
    });
    expect(responses.render({ type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_text', text: 'p' }] }).text).toBe('p');
  });

  it('anything else is named by its type and shows nothing', () => {
    expect(responses.render({ type: 'reasoning', encrypted_content: 'secret', summary: [{ text: 'no' }] })).toEqual({
      who: 'reasoning',
      text: '',
      calls: [],
    });
    expect(responses.render(7)).toEqual({ who: 'unknown', text: '', calls: [] });
    // An item with neither type nor role is not a message: nothing of it is shown.
    expect(responses.render({ content: 'stray' })).toEqual({ who: 'unknown', text: '', calls: [] });
    expect(responses.slots({ content: 'stray' })).toEqual([]);
  });
});

describe('responses.slots', () => {
  const data = 'data:image/png;base64,AAAA';

  it('message contents: strings, text parts and inline images; placeholders typed for the role', () => {
    expect(responses.slots({ type: 'message', role: 'user', content: 'x' })).toEqual([{ kind: 'text', path: ['content'], text: 'x' }]);
    const user = responses.slots({
      type: 'message',
      role: 'user',
      content: [
        { type: 'input_text', text: 't' },
        { type: 'input_image', image_url: data },
        { type: 'input_image', image_url: 'https://x' },
        { type: 'input_file', file_data: data },
        3,
        null,
      ],
    });
    expect(user.map((s) => [s.kind, s.path])).toEqual([
      ['text', ['content', 0, 'text']],
      ['image', ['content', 1]],
    ]);
    const image = user[1] as Extract<(typeof user)[number], { kind: 'image' }>;
    expect(image.value).toEqual({ type: 'input_image', image_url: data });
    expect(image.placeholder('gone')).toEqual({ type: 'input_text', text: 'gone' });
    const assistant = responses.slots({ role: 'assistant', content: [{ type: 'input_image', image_url: data }] });
    expect((assistant[0] as Extract<(typeof user)[number], { kind: 'image' }>).placeholder('gone')).toEqual({
      type: 'output_text',
      text: 'gone',
    });
  });

  it('call outputs: their output, a string or parts', () => {
    expect(responses.slots({ type: 'function_call_output', call_id: 'c', output: 'long' })).toEqual([
      { kind: 'text', path: ['output'], text: 'long' },
    ]);
    const parts = responses.slots({ type: 'custom_tool_call_output', call_id: 'c', output: [{ type: 'input_image', image_url: data }] });
    expect(parts.map((s) => [s.kind, s.path])).toEqual([['image', ['output', 0]]]);
    expect((parts[0] as Extract<(typeof parts)[number], { kind: 'image' }>).placeholder('gone')).toEqual({
      type: 'input_text',
      text: 'gone',
    });
  });

  it('calls, reasoning and other provider state are never shortened', () => {
    expect(responses.slots({ type: 'function_call', call_id: 'c', arguments: 'x'.repeat(5000) })).toEqual([]);
    expect(responses.slots({ type: 'reasoning', encrypted_content: 'x'.repeat(5000), content: 'x' })).toEqual([]);
    expect(responses.slots({ type: 'message', role: 'user', content: null })).toEqual([]);
    expect(responses.slots('x')).toEqual([]);
    expect(responses.slots(null)).toEqual([]);
    // An MCP call carries its own output; it is a call, and calls are never shortened.
    expect(responses.slots({ type: 'mcp_call', id: 'm1', name: 'q', arguments: '{}', output: 'x'.repeat(5000) })).toEqual([]);
  });
});

describe('responses.streamEvent', () => {
  const kind = responses.streamEvent!;

  it('created, in_progress and queued are a preamble; failed and error a failure; the rest output', () => {
    for (const e of ['response.created', 'response.in_progress', 'response.queued']) expect(kind(e, '{}')).toBe('preamble');
    for (const e of ['response.failed', 'error']) expect(kind(e, '{}')).toBe('failure');
    for (const e of ['response.output_text.delta', 'response.completed', 'response.output_item.added'])
      expect(kind(e, '{}')).toBe('output');
  });

  it('without an event name, the first type the data names decides', () => {
    expect(kind(undefined, '{"type": "response.created","response":{"type":"x"}}')).toBe('preamble');
    expect(kind(undefined, '{"type":"response.failed"}')).toBe('failure');
    expect(kind(undefined, '{"type" :\t"response.failed"}')).toBe('failure');
    expect(kind(undefined, '{"type":"response.output_text.delta"}')).toBe('output');
    expect(kind(undefined, 'no type here')).toBe('output');
  });

  it('the event name wins over the data, and only the data’s first 200 characters are read', () => {
    expect(kind('response.output_text.delta', '{"type":"error"}')).toBe('output');
    expect(kind(undefined, `{"pad":"${'x'.repeat(200)}","type":"error"}`)).toBe('output');
  });
});

describe('responses: write, summaries, completion, server-side rescue', () => {
  it('writes the input back, every other field as sent and in its place', () => {
    expect(responses.write({ model: 'm', input: 'x', store: false }, [{ role: 'user', content: 'y' }]).toString()).toBe(
      '{"model":"m","input":[{"role":"user","content":"y"}],"store":false}',
    );
  });

  it('a summary is a message whose text part is typed for its role', () => {
    expect(responses.summaryItem('S', 'user')).toEqual({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'S' }] });
    expect(responses.summaryItem('S', 'assistant')).toEqual({
      type: 'message',
      role: 'assistant',
      content: [{ type: 'output_text', text: 'S' }],
    });
    expect(responses.summaryItem('S', 'developer')).toEqual({
      type: 'message',
      role: 'developer',
      content: [{ type: 'input_text', text: 'S' }],
    });
  });

  it('the completion is max_output_tokens', () => {
    expect(responses.completion({ max_output_tokens: 500, max_tokens: 9 })).toBe(500);
    expect(responses.completion({ max_tokens: 9 })).toBeUndefined();
    expect(responses.withCompletion({ model: 'm', max_output_tokens: 500, x: 1 }, 100)!.toString()).toBe(
      '{"model":"m","max_output_tokens":100,"x":1}',
    );
  });

  it('a history held upstream is replayed with truncation "auto", once', () => {
    const held = { model: 'm', previous_response_id: 'resp_1', input: [], truncation: 'disabled' };
    expect(JSON.parse(responses.serverSideRescue(held)!.toString())).toEqual({ ...held, truncation: 'auto' });
    expect(responses.serverSideRescue({ ...held, truncation: 'auto' })).toBeNull();
    expect(responses.serverSideRescue({ model: 'm', input: [] })).toBeNull();
    expect(responses.problems([])).toEqual([]);
    expect(responses.api).toBe('responses');
  });
});

describe('responses.summarizer', () => {
  it('asks /responses with instructions, the transcript as one user message, nothing stored', () => {
    expect(responses.summarizer.path('m')).toBe('/responses');
    expect(responses.summarizer.body({ model: 'sm', instructions: 'I', transcript: 'T', maxTokens: 200, request: {} })).toEqual({
      model: 'sm',
      instructions: 'I',
      input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'T' }] }],
      max_output_tokens: 200,
      store: false,
      stream: false,
    });
    expect(responses.summarizer.headers({})).toEqual({});
  });

  it('reads output_text, else the texts of the output messages', () => {
    const text = responses.summarizer.text;
    expect(text({ output_text: 'S', output: [] })).toBe('S');
    expect(
      text({
        output: [
          { type: 'reasoning', content: [{ type: 'output_text', text: 'hidden' }] },
          { type: 'message', content: [{ type: 'output_text', text: 'a' }] },
          { type: 'message', content: [{ type: 'output_text', text: 'b' }] },
        ],
      }),
    ).toBe('a\nb');
    expect(text({ output: [{ type: 'reasoning' }] })).toBeUndefined();
    expect(text({ output: 'x' })).toBeUndefined();
    expect(text({})).toBeUndefined();
    expect(text(null)).toBeUndefined();
  });
});
