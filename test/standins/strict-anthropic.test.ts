import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { BINDING_BETA, type StrictAnthropic, type StrictAnthropicOptions } from '../helpers/strict-anthropic.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * The strict Anthropic stand-in enforces preserved thinking's prefix binding as the docs state
 * it, with the API's exact errors. Each scenario builds a conversation from the blocks the
 * stand-in issued, through the official SDK, then changes one thing and sends it again.
 */

const MODEL = 'claude-fable-5-1';
const SYSTEM = [{ type: 'text', text: 'You review code.' }];
const TOOLS = [
  { name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } } },
];
const BOUND = (path: string) =>
  `${path}: Invalid \`signature\` in \`thinking\` block. The block is bound to a different conversation. ` +
  'Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".';
const NO_BETA = ` That setting requires the \`${BINDING_BETA}\` value in the \`anthropic-beta\` header.`;
const DROP_BLOCK = { type: 'adaptive', block_binding: { prefix_mismatch_behavior: 'drop_block' } };

let upstream: StrictAnthropic;
afterEach(async () => upstream?.close());

/** Odd turns read a file, even turns answer in text: every conversation has tool rounds. */
async function start(options: StrictAnthropicOptions = {}) {
  upstream = await startStandIn({
    provider: 'anthropic',
    reply: (req) => {
      const n = req.json.messages.length;
      return n % 4 === 1 ? { toolUse: { id: `toolu_${n}`, name: 'read_file', input: { path: `f${n}.ts` } } } : { text: `reviewed ${n}` };
    },
    ...options,
  });
  return new Anthropic({ baseURL: upstream.origin, apiKey: 'x', maxRetries: 0 });
}

const request = (messages: any[], extra: Record<string, unknown> = {}): any => ({
  model: MODEL,
  max_tokens: 1024,
  system: SYSTEM,
  tools: TOOLS,
  thinking: { type: 'adaptive', display: 'omitted' },
  messages,
  ...extra,
});

/** After the user's first turn, `answers` answers appended as returned, each followed by the user's turn:
 * messages 1, 3, 5... are the assistant's, each starting with its thinking block. */
async function converse(api: Anthropic, answers: number, send: 'create' | 'stream' = 'create'): Promise<any[]> {
  let messages: any[] = [{ role: 'user', content: 'Review src/.' }];
  for (let n = 0; n < answers; n++) {
    const params = request(messages);
    const answer = send === 'create' ? await api.messages.create(params) : await api.messages.stream(params).finalMessage();
    const use = answer.content.find((b) => b.type === 'tool_use');
    const next = use
      ? [{ type: 'tool_result', tool_use_id: use.id, content: `contents of ${(use.input as any).path}` }]
      : `go on after ${n}`;
    messages = [...messages, { role: 'assistant', content: answer.content }, { role: 'user', content: next }];
  }
  return messages;
}

/** The status and body the SDK saw for a refused request. */
async function refusal(sent: Promise<unknown>): Promise<{ status: number; body: any }> {
  const err = await sent.then(
    () => null,
    (e) => e,
  );
  expect(err, 'the request was refused').toBeInstanceOf(Anthropic.APIError);
  return { status: err.status, body: err.error };
}

const withoutThinking = (m: any) => ({
  ...m,
  content: Array.isArray(m.content) ? m.content.filter((b: any) => b.type !== 'thinking') : m.content,
});
const edit = (messages: any[], i: number, change: (m: any) => any) => messages.map((m, k) => (k === i ? change(structuredClone(m)) : m));

describe('appending', () => {
  it.each(['create', 'stream'] as const)('keeps every block it issued valid (%s)', async (send) => {
    const api = await start();
    const messages = await converse(api, 3, send);
    await api.messages.create(request(messages));
    expect(upstream.issued().map((i) => i.call)).toEqual([0, 1, 2, 3]);
    expect(messages.filter((m) => m.role === 'assistant').map((m) => m.content[0])).toEqual(
      upstream
        .issued()
        .slice(0, 3)
        .map((i) => i.block),
    );
    expect(upstream.checks()).toEqual(Array(4).fill({ refused: null, invalid: [], dropped: [], dropBlock: false }));
  });
});

describe('removing thinking blocks', () => {
  it.each([
    ['all of them', [1, 3, 5]],
    ['from the start', [1, 3]],
    ['from the end', [5]],
  ])('%s is accepted', async (_, from) => {
    const api = await start();
    const messages = await converse(api, 3);
    await api.messages.create(request(messages.map((m, i) => (from.includes(i) ? withoutThinking(m) : m))));
    expect(upstream.checks().at(-1)).toEqual({ refused: null, invalid: [], dropped: [], dropBlock: false });
  });

  it('from the middle is refused at the next block', async () => {
    const api = await start();
    const messages = await converse(api, 3);
    const sent = refusal(api.messages.create(request(edit(messages, 3, withoutThinking))));
    const message =
      BOUND('messages.5.content.0') +
      NO_BETA +
      ' A thinking block that preceded this block when it was created is missing from this request.';
    expect(await sent).toEqual({
      status: 400,
      body: { type: 'error', error: { type: 'invalid_request_error', message }, request_id: expect.stringMatching(/^req_/) },
    });
    expect(upstream.checks().at(-1)?.invalid).toEqual(['messages.5.content.0']);
  });

  it('and putting one back invalidates the block created while it was gone', async () => {
    const api = await start();
    const first = await converse(api, 1);
    const answer = await api.messages.create(request(edit(first, 1, withoutThinking)));
    const messages = [...first, { role: 'assistant', content: answer.content }, { role: 'user', content: 'and now?' }];
    const { body } = await refusal(api.messages.create(request(messages)));
    expect(body.error.message).toBe(
      BOUND('messages.3.content.0') + NO_BETA + ' A thinking block before this block was not there when it was created.',
    );
  });
});

describe('editing what came before a block', () => {
  it.each<[string, (m: any[]) => any[], string, string, Record<string, unknown>?]>([
    [
      'an earlier text',
      (m: any[]) => edit(m, 4, () => ({ role: 'user', content: 'go on, but differently' })),
      'messages.5.content.0',
      'Content before this block differs from when it was created.',
    ],
    [
      'an earlier tool_result',
      (m: any[]) => edit(m, 2, (u) => ({ ...u, content: [{ ...u.content[0], content: 'shortened' }] })),
      'messages.3.content.0',
      'Content before this block differs from when it was created.',
    ],
    [
      'an earlier tool_use input',
      (m: any[]) => edit(m, 1, (a) => ({ ...a, content: [a.content[0], { ...a.content[1], input: { path: 'other.ts' } }] })),
      'messages.3.content.0',
      'Content before this block differs from when it was created.',
    ],
    [
      'the system prompt',
      (m: any[]) => m,
      'messages.1.content.0',
      'The `system` prompt differs from when the block was created.',
      { system: [{ type: 'text', text: 'You review code carefully.' }] },
    ],
    [
      'the tools',
      (m: any[]) => m,
      'messages.1.content.0',
      'The `tools` list differs from when the block was created.',
      { tools: [...TOOLS, { ...TOOLS[0], name: 'write_file' }] },
    ],
  ])('%s is refused, naming what changed', async (_, change, path, reason, extra = {}) => {
    const api = await start();
    const messages = await converse(api, 3);
    const { status, body } = await refusal(api.messages.create(request(change(messages), extra)));
    expect(status).toBe(400);
    expect(body.error.message).toBe(`${BOUND(path)}${NO_BETA} ${reason}`);
  });

  it('cache_control markers, key order and parameters outside system/tools/messages are not edits', async () => {
    const api = await start();
    const messages = await converse(api, 3);
    const ephemeral = { type: 'ephemeral' };
    const reordered = edit(messages, 1, (a) => ({
      content: [a.content[0], Object.fromEntries(Object.entries(a.content[1]).reverse())],
      role: a.role,
    }));
    const marked = edit(reordered, 2, (u) => ({ ...u, content: [{ cache_control: ephemeral, ...u.content[0] }] }));
    const tools = [
      { input_schema: TOOLS[0].input_schema, cache_control: ephemeral, description: TOOLS[0].description, name: TOOLS[0].name },
    ];
    const system = [{ ...SYSTEM[0], cache_control: ephemeral }];
    await api.messages.create(
      request(marked, {
        system,
        tools,
        max_tokens: 4096,
        thinking: { type: 'enabled', budget_tokens: 2048 },
        tool_choice: { type: 'auto' },
      }),
    );
    expect(upstream.checks().at(-1)).toEqual({ refused: null, invalid: [], dropped: [], dropBlock: false });
  });

  it('a string content and the one text block it stands for are the same value (Claude Code sends both, turn to turn)', async () => {
    const api = await start();
    const messages = await converse(api, 3);
    const asBlock = edit(messages, 0, (u) => ({
      ...u,
      content: [{ type: 'text', text: u.content, cache_control: { type: 'ephemeral' } }],
    }));
    await api.messages.create(request(asBlock));
    expect(upstream.checks().at(-1)).toEqual({ refused: null, invalid: [], dropped: [], dropBlock: false });
    // Compared as sent, the same request is an edit.
    await upstream.close();
    const strict = await start({ stringContentAsBlock: false });
    const strictMessages = await converse(strict, 3);
    const { status } = await refusal(
      strict.messages.create(request(edit(strictMessages, 0, (u) => ({ ...u, content: [{ type: 'text', text: u.content }] })))),
    );
    expect(status).toBe(400);
  });
});

describe('drop_block', () => {
  it('without the beta is an unknown field', async () => {
    const api = await start();
    const { status, body } = await refusal(api.messages.create(request(await converse(api, 1), { thinking: DROP_BLOCK })));
    expect(status).toBe(400);
    expect(body.error).toEqual({
      type: 'invalid_request_error',
      message: 'thinking.adaptive.block_binding: Extra inputs are not permitted',
    });
  });

  it('with the beta drops the failing block and every later one, and says so', async () => {
    const api = await start();
    const messages = edit(await converse(api, 3), 2, (u) => ({ ...u, content: [{ ...u.content[0], content: 'shortened' }] }));
    const answer: any = await api.beta.messages.create({ ...request(messages, { thinking: DROP_BLOCK }), betas: [BINDING_BETA] });
    const dropped = ['messages.3.content.0', 'messages.5.content.0'];
    expect(answer.input_transformations).toEqual(
      dropped.map((path) => ({ type: 'thinking_dropped', path, reason: 'prefix_binding_mismatch' })),
    );
    expect(upstream.checks().at(-1)).toEqual({ refused: null, invalid: dropped, dropped, dropBlock: true });
    // The new block follows the last one sent, dropped or not: the check compares what was sent.
    const next = [...messages, { role: 'assistant', content: answer.content }, { role: 'user', content: 'next' }];
    const again: any = await api.beta.messages.create({ ...request(next, { thinking: DROP_BLOCK }), betas: [BINDING_BETA] });
    expect(again.input_transformations.map((t: any) => t.path)).toEqual([...dropped, 'messages.7.content.0']);
  });

  it('reports on message_start when streaming', async () => {
    const api = await start();
    const messages = edit(await converse(api, 3), 4, () => ({ role: 'user', content: 'changed' }));
    const events: any[] = [];
    for await (const e of api.beta.messages.stream({ ...request(messages, { thinking: DROP_BLOCK }), betas: [BINDING_BETA] }))
      events.push(e);
    expect(events.map((e) => e.type)).toEqual([
      'message_start',
      ...['content_block_start', 'content_block_delta', 'content_block_stop'],
      ...['content_block_start', 'content_block_delta', 'content_block_stop'],
      'message_delta',
      'message_stop',
    ]);
    expect(events[0].message.input_transformations).toEqual([
      { type: 'thinking_dropped', path: 'messages.5.content.0', reason: 'prefix_binding_mismatch' },
    ]);
    expect(events[2].delta).toEqual({ type: 'signature_delta', signature: upstream.issued().at(-1)?.block.signature });
  });

  it('the beta alone reports an empty list; without it there is no list', async () => {
    const api = await start();
    const messages = await converse(api, 1);
    const withBeta: any = await api.beta.messages.create({ ...request(messages), betas: [BINDING_BETA] });
    const without: any = await api.messages.create(request(messages));
    expect(withBeta.input_transformations).toEqual([]);
    expect(without).not.toHaveProperty('input_transformations');
  });

  it('a block from another model is dropped whatever the request says', async () => {
    const api = await start();
    const messages = await converse(api, 1);
    const answer: any = await api.beta.messages.create({ ...request(messages), model: 'claude-opus-5-5', betas: [BINDING_BETA] });
    expect(answer.input_transformations).toEqual([
      { type: 'thinking_dropped', path: 'messages.1.content.0', reason: 'model_binding_mismatch' },
    ]);
    const silent: any = await api.messages.create({ ...request(messages), model: 'claude-opus-5-5' });
    expect(silent).not.toHaveProperty('input_transformations');
    expect(upstream.checks().at(-1)?.dropped).toEqual(['messages.1.content.0']);
  });

  it('a serving model other than the requested one signs blocks the next request drops', async () => {
    const api = await start({ model: 'claude-fallback' });
    const answer: any = await api.beta.messages.create({ ...request(await converse(api, 1)), betas: [BINDING_BETA] });
    expect(answer.model).toBe('claude-fallback');
    expect(answer.input_transformations).toEqual([
      { type: 'thinking_dropped', path: 'messages.1.content.0', reason: 'model_binding_mismatch' },
    ]);
  });
});

describe('a signature that is not what it issued', () => {
  const forge = (signature: string) => {
    const [body, tag] = signature.split('.');
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString());
    return `${Buffer.from(JSON.stringify({ ...payload, prev: null })).toString('base64url')}.${tag}`;
  };
  it.each([
    ['forged', (b: any) => ({ ...b, signature: 'EqQBCkYIBxgCKkDforged' })],
    ['edited', (b: any) => ({ ...b, signature: forge(b.signature) })],
    ['empty', (b: any) => ({ ...b, signature: '' })],
    ['on edited thinking text', (b: any) => ({ ...b, thinking: 'I changed my mind.' })],
  ])('%s is the bare 400, drop_block or not', async (_, tamper) => {
    const api = await start();
    const messages = edit(await converse(api, 3), 3, (a) => ({ ...a, content: [tamper(a.content[0]), ...a.content.slice(1)] }));
    const { status, body } = await refusal(
      api.beta.messages.create({ ...request(messages, { thinking: DROP_BLOCK }), betas: [BINDING_BETA] }),
    );
    expect(status).toBe(400);
    expect(body.error.message).toBe('messages.3.content.0: Invalid `signature` in `thinking` block');
  });
});

describe('an open tool round', () => {
  it('with thinking enabled, the final assistant message must start with its thinking; adaptive lets it go', async () => {
    const api = await start();
    const messages = edit(await converse(api, 1), 1, withoutThinking);
    const { status, body } = await refusal(api.messages.create(request(messages, { thinking: { type: 'enabled', budget_tokens: 1024 } })));
    expect(status).toBe(400);
    expect(body.error.message).toBe(
      'messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When thinking is enabled, a final assistant message must start with a thinking block.',
    );
    await api.messages.create(request(messages));
    expect(upstream.checks().at(-1)?.refused).toBeNull();
  });
});

describe('tool pairs', () => {
  it("a tool_result whose tool_use is not in the message before it is refused, in the API's words", async () => {
    const api = await start();
    const messages = await converse(api, 1);
    // The assistant turn with the call is gone: the result now follows the user's first turn.
    const { status, body } = await refusal(
      api.messages.create(request([messages[0], { role: 'assistant', content: 'Let me look.' }, messages[2]])),
    );
    expect(status).toBe(400);
    expect(body.error.message).toBe(
      'messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_1. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.',
    );
  });

  it('a tool_use without its tool_result in the very next message is refused, every id named', async () => {
    const api = await start();
    const messages = await converse(api, 1);
    const second = { type: 'tool_use', id: 'toolu_extra', name: 'read_file', input: { path: 'g.ts' } };
    const twoCalls = edit(messages, 1, (m) => ({ ...m, content: [...m.content, second] }));
    const unanswered = [...twoCalls.slice(0, 2), { role: 'user', content: 'never mind' }];
    const { status, body } = await refusal(api.messages.create(request(unanswered)));
    expect(status).toBe(400);
    expect(body.error.message).toBe(
      'messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1, toolu_extra. Each `tool_use` block must have a corresponding `tool_result` block in the next message.',
    );
    // One result of two is still one missing.
    const { body: half } = await refusal(api.messages.create(request(twoCalls)));
    expect(half.error.message).toMatch(
      /^messages\.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_extra\. /,
    );
    await api.messages.create(request(messages));
    expect(upstream.checks().at(-1)?.refused).toBeNull();
  });
});

describe('cache breakpoints', () => {
  const marked = (text: string) => ({ type: 'text', text, cache_control: { type: 'ephemeral' } });

  it("at most four a request, counted across tools, system and messages (a tool_result's content too)", async () => {
    const api = await start();
    const tools = [{ ...TOOLS[0], cache_control: { type: 'ephemeral' } }];
    const messages = [
      { role: 'user', content: [marked('Review src/.')] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'f1.ts' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [marked('contents of f1.ts')] }] },
    ];
    const unthinking = { tools, thinking: { type: 'disabled' } };
    await api.messages.create(
      request(messages, { ...unthinking, system: [marked('You review code.'), { type: 'text', text: 'Be brief.' }] }),
    );
    expect(upstream.checks().at(-1)?.refused).toBeNull();
    const { status, body } = await refusal(
      api.messages.create(request(messages, { ...unthinking, system: [marked('You review code.'), marked('Be brief.')] })),
    );
    expect(status).toBe(400);
    expect(body.error).toEqual({
      type: 'invalid_request_error',
      message: 'A maximum of 4 blocks with cache_control may be provided. Found 5.',
    });
  });
});

describe('the window', () => {
  const big = [{ role: 'user', content: 'x'.repeat(3000) }];
  const send = (stream: boolean, headers: Record<string, string> = {}) =>
    fetch(`${upstream.baseUrl}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(request(big, { stream })),
    });

  it.each([
    [
      'prompt_too_long',
      false,
      400,
      /^\{"type":"error","error":\{"type":"invalid_request_error","message":"prompt is too long: \d+ tokens > 500 maximum"\},"request_id":"req_\w+"\}$/,
    ],
    ['json_413', false, 413, /"error":\{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."\}/],
    ['edge_413', false, 413, /<title>413 Request Entity Too Large<\/title>/],
    [
      'sse_error',
      true,
      200,
      /event: message_start[\s\S]*event: error\ndata: \{"type":"error","error":\{"type":"invalid_request_error","message":"prompt is too long: \d+ tokens > 500 maximum"\}\}/,
    ],
    ['sse_error', false, 400, /"message":"prompt is too long: \d+ tokens > 500 maximum"/],
  ] as const)('%s (stream %s) -> %i', async (style, stream, status, body) => {
    await start({ limitBytes: 2000, style });
    const res = await send(stream);
    expect(res.status).toBe(status);
    expect(await res.text()).toMatch(body);
  });

  it('input_plus_max_tokens: the prompt and max_tokens together over the window; the prompt alone over it is too long', async () => {
    const ask = (messages: any[], max_tokens: number) =>
      fetch(`${upstream.baseUrl}/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(request(messages, { max_tokens })),
      });
    await start({ limitBytes: 8000, style: 'input_plus_max_tokens' });
    expect((await ask(big, 100)).status).toBe(200);
    const over = await ask(big, 1500);
    expect(over.status).toBe(400);
    expect(((await over.json()) as any).error.message).toMatch(
      /^input length and `max_tokens` exceed context limit: \d+ \+ 1500 > 2000, decrease input length or `max_tokens` and try again$/,
    );
    const alone = await ask([{ role: 'user', content: 'x'.repeat(9000) }], 1);
    expect(((await alone.json()) as any).error.message).toMatch(/^prompt is too long: \d+ tokens > 2000 maximum$/);
  });

  it('size refusals come before the binding checks, the window after them', async () => {
    const binding = { thinking: DROP_BLOCK };
    for (const [style, status] of [
      ['edge_413', 413],
      ['json_413', 413],
      ['prompt_too_long', 400],
    ] as const) {
      await start({ limitBytes: 2000, style });
      const res = await fetch(`${upstream.baseUrl}/messages`, { method: 'POST', body: JSON.stringify(request(big, binding)) });
      expect(res.status).toBe(status);
      if (style === 'prompt_too_long')
        expect(((await res.json()) as any).error.message).toBe('thinking.adaptive.block_binding: Extra inputs are not permitted');
      await upstream.close();
    }
  });
});

describe('the summarizer', () => {
  it('is checked like any request and answered in plain text, outside checks()', async () => {
    const api = await start();
    const messages = await converse(api, 1);
    const summarizer = { headers: { 'x-gateway-compaction': 'summarizer' } };
    const summary = await api.messages.create(request([{ role: 'user', content: 'a transcript' }]), summarizer);
    expect(summary.content).toEqual([{ type: 'text', text: 'SUMMARY of 12 chars: the user asked for a review of src/.' }]);
    const edited = edit(messages, 0, () => ({ role: 'user', content: 'Review lib/.' }));
    const { status } = await refusal(api.messages.create(request(edited), summarizer));
    expect(status).toBe(400);
    expect(upstream.summarizerCalls()).toHaveLength(2);
    expect(upstream.checks()).toHaveLength(1);
    expect(upstream.issued()).toHaveLength(1);
  });
});
