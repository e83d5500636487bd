import { describe, expect, it } from 'vitest';
import { rebind, type BoundMemory } from '../../src/compaction/bound.js';
import { BINDING_BETA, messages } from '../../src/dialects/messages.js';
import { responses } from '../../src/dialects/responses.js';

/*
 * Signed thinking after a compaction's edit point, as the Messages dialect rebinds it: stale
 * blocks (made before the compacted prefix existed) stripped, fresh ones (made after it) kept,
 * the open tool round's kept under drop_block where thinking is enabled.
 */

const think = (n: number) => ({ type: 'thinking', thinking: '', signature: `sig-${n}` });
const assistant = (n: number, thinking = true) => ({
  role: 'assistant',
  content: [
    ...(thinking ? [think(n)] : []),
    { type: 'text', text: `step ${n}` },
    { type: 'tool_use', id: `t${n}`, name: 'Read', input: { n } },
  ],
});
const result = (n: number) => ({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `t${n}`, content: `file ${n}` }] });
const task = { role: 'user', content: [{ type: 'text', text: 'Review the code.' }] };
const summary = { role: 'user', content: [{ type: 'text', text: '[compaction-gateway] summary' }] };

/** The client's conversation: the task, then `turns` tool rounds, the last one open. */
function conversation(turns: number) {
  const items: unknown[] = [task];
  for (let n = 1; n <= turns; n++) items.push(assistant(n), result(n));
  return items;
}

/** Compacted as the planner does: the task, a summary, the rounds from `from` on. */
function compacted(original: unknown[], from: number) {
  const tailStart = 1 + 2 * (from - 1);
  return {
    items: [original[0], summary, ...original.slice(tailStart)],
    origins: [0, null, ...original.slice(tailStart).map((_, k) => tailStart + k)],
  };
}

const adaptive = { model: 'claude', thinking: { type: 'adaptive' } };
const enabled = { model: 'claude', thinking: { type: 'enabled', budget_tokens: 2000 } };
const firstTime = (original: unknown[]): BoundMemory => ({ freshFrom: original.length, stripAll: false });
const thinkingOf = (items: unknown[]) =>
  items.flatMap((m: any) =>
    (Array.isArray(m.content) ? m.content : []).filter((b: any) => b.type === 'thinking').map((b: any) => b.signature),
  );

describe('the first compaction: every block after the edit point is stale', () => {
  it('thinking adaptive: all stripped, text and tool_use kept byte-exact, no opt-in', () => {
    const original = conversation(6);
    const { items, origins } = compacted(original, 4);
    const r = rebind(messages.bound, adaptive, {}, original, items, origins, firstTime(original));
    expect(r.stripped).toBe(3);
    expect(r.optIn).toBe(false);
    expect(r.request).toBe(adaptive);
    expect(r.headers).toEqual({});
    expect(thinkingOf(r.items)).toEqual([]);
    expect(r.items[2]).toEqual({ ...assistant(4, false) });
    expect(JSON.stringify((r.items[2] as any).content)).toBe(JSON.stringify((original[7] as any).content.slice(1)));
    expect(r.items[3]).toBe(original[8]);
  });

  it('thinking enabled: the open round keeps its block under drop_block, the beta appended to the caller\u2019s', () => {
    const original = conversation(6);
    const { items, origins } = compacted(original, 4);
    const r = rebind(
      messages.bound,
      enabled,
      { 'anthropic-beta': 'claude-code-20250219, interleaved-thinking-2025-05-14' },
      original,
      items,
      origins,
      firstTime(original),
    );
    expect(r.stripped).toBe(2);
    expect(r.optIn).toBe(true);
    expect(thinkingOf(r.items)).toEqual(['sig-6']);
    expect(r.items.at(-2)).toBe(original.at(-2));
    expect(r.request).toEqual({ ...enabled, thinking: { ...enabled.thinking, block_binding: { prefix_mismatch_behavior: 'drop_block' } } });
    expect(r.headers).toEqual({ 'anthropic-beta': `claude-code-20250219,interleaved-thinking-2025-05-14,${BINDING_BETA}` });
  });

  it('thinking enabled, the tool results followed by a user reminder and a system entry: still the open round (they are one message on the wire)', () => {
    const original = [
      ...conversation(6),
      { role: 'user', content: [{ type: 'text', text: '<system-reminder>x</system-reminder>' }] },
      { role: 'system', content: 'env' },
    ];
    const { items, origins } = compacted(original, 4);
    const r = rebind(messages.bound, enabled, {}, original, items, origins, firstTime(original));
    expect([thinkingOf(r.items), r.optIn]).toEqual([['sig-6'], true]);
  });

  it('after a refusal (stripAll) the open round under thinking enabled still keeps its block, under drop_block', () => {
    const original = conversation(6);
    const { items, origins } = compacted(original, 4);
    const r = rebind(messages.bound, enabled, {}, original, items, origins, { freshFrom: 0, stripAll: true });
    expect([thinkingOf(r.items), r.optIn, r.stripped]).toEqual([['sig-6'], true, 2]);
  });

  it('thinking enabled after a plain user turn: no open round, all stripped', () => {
    const original = [
      ...conversation(5),
      { role: 'assistant', content: [think(9), { type: 'text', text: 'done' }] },
      { role: 'user', content: 'and now?' },
    ];
    const { items, origins } = compacted(original, 3);
    const r = rebind(messages.bound, enabled, {}, original, items, origins, firstTime(original));
    expect(thinkingOf(r.items)).toEqual([]);
    expect(r.optIn).toBe(false);
  });

  it('the caller\u2019s own drop_block covers the open round, forwarded as sent; its "error" does not', () => {
    const original = conversation(6);
    const { items, origins } = compacted(original, 4);
    const own = { ...enabled, thinking: { ...enabled.thinking, block_binding: { prefix_mismatch_behavior: 'drop_block' } } };
    const covered = rebind(messages.bound, own, { 'anthropic-beta': BINDING_BETA }, original, items, origins, firstTime(original));
    expect([covered.optIn, covered.request, covered.headers, thinkingOf(covered.items)]).toEqual([true, own, {}, ['sig-6']]);
    const strict = { ...enabled, thinking: { ...enabled.thinking, block_binding: { prefix_mismatch_behavior: 'error' } } };
    const refused = rebind(messages.bound, strict, {}, original, items, origins, firstTime(original));
    expect([refused.optIn, refused.request, thinkingOf(refused.items)]).toEqual([false, strict, []]);
  });

  it('with thinking disabled nothing is ever opted in', () => {
    const original = conversation(6);
    const { items, origins } = compacted(original, 4);
    const off = { model: 'claude', thinking: { type: 'disabled' } };
    const r = rebind(messages.bound, off, {}, original, items, origins, firstTime(original));
    expect([r.optIn, r.stripped, r.request]).toEqual([false, 3, off]);
  });

  it('an assistant message of thinking alone is dropped whole', () => {
    const original = [
      task,
      assistant(1),
      result(1),
      { role: 'assistant', content: [think(2)] },
      { role: 'user', content: 'go on' },
      assistant(3),
      result(3),
    ];
    const items = [task, summary, ...original.slice(3)];
    const r = rebind(messages.bound, adaptive, {}, original, items, [0, null, 3, 4, 5, 6], firstTime(original));
    expect(r.items).toEqual([task, summary, original[4], assistant(3, false), original[6]]);
    expect(r.stripped).toBe(2);
  });
});

describe('a later turn under the same compacted prefix', () => {
  it('blocks made before it stay stripped, blocks made after it pass untouched: the same bytes as the turn before, plus the new ones', () => {
    const before = conversation(6);
    const turnA = compacted(before, 4);
    const memory = firstTime(before);
    const sentA = rebind(messages.bound, adaptive, {}, before, turnA.items, turnA.origins, memory).items;
    const after = conversation(8);
    const turnB = compacted(after, 4);
    const sentB = rebind(messages.bound, adaptive, {}, after, turnB.items, turnB.origins, memory).items;
    expect(JSON.stringify(sentB.slice(0, sentA.length))).toBe(JSON.stringify(sentA));
    expect(thinkingOf(sentB)).toEqual(['sig-7', 'sig-8']);
  });

  it('the open round kept under drop_block on its turn is stripped on the next (thinking removed from the start of the run)', () => {
    const before = conversation(6);
    const turnA = compacted(before, 4);
    const memory = firstTime(before);
    expect(thinkingOf(rebind(messages.bound, enabled, {}, before, turnA.items, turnA.origins, memory).items)).toEqual(['sig-6']);
    const after = conversation(7);
    const turnB = compacted(after, 4);
    const r = rebind(messages.bound, enabled, {}, after, turnB.items, turnB.origins, memory);
    expect(thinkingOf(r.items)).toEqual(['sig-7']);
    expect(r.optIn).toBe(false);
  });

  it('after a refusal (stripAll) every block after the edit point goes, fresh or not', () => {
    const after = conversation(8);
    const { items, origins } = compacted(after, 4);
    const r = rebind(messages.bound, adaptive, {}, after, items, origins, { freshFrom: 13, stripAll: true });
    expect([thinkingOf(r.items), r.optIn, r.stripped]).toEqual([[], false, 5]);
  });
});

describe('what stays as it is', () => {
  it('blocks before the edit point (nothing changed before them) stay, a cut item after them being the edit', () => {
    const original = conversation(2);
    const cut = { ...(original[4] as object), content: [{ type: 'tool_result', tool_use_id: 't2', content: 'fi [cut]' }] };
    const items = [...original.slice(0, 4), cut];
    const r = rebind(messages.bound, enabled, {}, original, items, [0, 1, 2, 3, 4], firstTime(original));
    expect(r.items).toEqual(items);
    expect(r.stripped).toBe(0);
  });

  it('an API without bound state (Responses: the provider drops stale reasoning itself) is left alone', () => {
    const original = [
      { type: 'message', role: 'user', content: 'hi' },
      { type: 'reasoning', encrypted_content: 'x' },
      { type: 'function_call', call_id: 'c' },
    ];
    const items = [original[0], { type: 'message', role: 'user', content: 'summary' }, original[1], original[2]];
    const r = rebind(responses.bound, {}, {}, original, items, [0, null, 1, 2], firstTime(original));
    expect(r).toEqual({ items, request: {}, headers: {}, stripped: 0, optIn: false });
  });
});

describe('what the upstream says it dropped (input_transformations)', () => {
  it('Messages: a JSON answer, a stream\u2019s message_start, none', () => {
    const list = [
      { type: 'thinking_dropped', path: 'messages.3.content.0', reason: 'prefix_binding_mismatch' },
      { type: 'thinking_mismatch_allowed', path: 'messages.5.content.0', reason: 'prefix_binding_mismatch' },
      { type: 'thinking_dropped', path: 'messages.5.content.0', reason: 'model_binding_mismatch' },
    ];
    expect(messages.droppedState!(JSON.stringify({ id: 'msg', content: [], input_transformations: list }))).toBe(2);
    const start = `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { id: 'msg', input_transformations: list.slice(0, 1) } })}\n\n`;
    expect(messages.droppedState!(start)).toBe(1);
    expect(
      messages.droppedState!(
        `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { input_transformations: [] } })}\n\n`,
      ),
    ).toBe(0);
    expect(messages.droppedState!('{"id":"msg","content":[]}')).toBeUndefined();
  });

  it('Responses: reasoning items removed, on the JSON answer or response.created', () => {
    const list = [{ type: 'reasoning', action: 'removed', id: 'rs_1', reason: 'prefix_changed' }];
    expect(responses.droppedState!(JSON.stringify({ id: 'resp', output: [], input_transformations: list }))).toBe(1);
    const created = `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', response: { id: 'resp', input_transformations: [...list, ...list] } })}\n\n`;
    expect(responses.droppedState!(created)).toBe(2);
    expect(responses.droppedState!('{"id":"resp","output":[]}')).toBeUndefined();
  });
});
