import fc from 'fast-check';
import { expect, it } from 'vitest';
import { compact } from '../../src/compaction/index.js';
import { sizeTarget } from '../../src/compaction/size-target.js';
import { validateConfig } from '../../src/config/load.js';
import { messages as dialect } from '../../src/dialects/messages.js';
import { countBreakpoints, expectWellFormed } from '../helpers/anthropic.js';

/*
 * Random Claude Code-like conversations (thinking or not, zero to three tool calls per turn,
 * results as strings or blocks with images, plain user turns, a system entry, breakpoints here
 * and there), compacted through the core with the deterministic fallback at random targets.
 * Whatever the planner decides, what the dialect writes must be a request the API accepts.
 */

const CC = { type: 'ephemeral' };

const turnArb = fc.record({
  thinking: fc.constantFrom('none', 'thinking', 'redacted'),
  textChars: fc.integer({ min: 0, max: 3_000 }),
  calls: fc.integer({ min: 0, max: 3 }),
  resultBytes: fc.array(fc.integer({ min: 1, max: 12_000 }), { minLength: 3, maxLength: 3 }),
  resultAsBlocks: fc.boolean(),
  image: fc.boolean(),
  reminder: fc.boolean(),
  userAsString: fc.boolean(),
  breakpoint: fc.boolean(),
});

const requestArb = fc.record({
  taskChars: fc.integer({ min: 10, max: 40_000 }),
  systemEntry: fc.boolean(),
  turns: fc.array(turnArb, { minLength: 1, maxLength: 14 }),
  shrinkTo: fc.double({ min: 0.05, max: 0.95, noNaN: true }),
  reason: fc.constantFrom('context_length' as const, 'body_too_large' as const),
});

function build(r: any): Record<string, any> {
  const msgs: any[] = [{ role: 'user', content: [{ type: 'text', text: 't'.repeat(r.taskChars) }] }];
  if (r.systemEntry) msgs.push({ role: 'system', content: '# Environment' });
  let breakpoints = 0;
  r.turns.forEach((t: any, k: number) => {
    const content: any[] = [];
    if (t.thinking === 'thinking') content.push({ type: 'thinking', thinking: `step ${k}`, signature: `sig${k}${'S'.repeat(100)}` });
    if (t.thinking === 'redacted') content.push({ type: 'redacted_thinking', data: `red${k}${'R'.repeat(100)}` });
    content.push({ type: 'text', text: `turn ${k} ${'a'.repeat(t.textChars)}` });
    const ids = Array.from({ length: t.calls }, (_, c) => `toolu_${k}_${c}`);
    for (const id of ids) content.push({ type: 'tool_use', id, name: 'Read', input: { file_path: `/src/${id}.ts` } });
    msgs.push({ role: 'assistant', content });
    const mark = t.breakpoint && breakpoints < 2 ? (breakpoints++, { cache_control: CC }) : {};
    if (ids.length === 0) {
      msgs.push(
        t.userAsString ? { role: 'user', content: `next ${k}` } : { role: 'user', content: [{ type: 'text', text: `next ${k}`, ...mark }] },
      );
      return;
    }
    const results = ids.map((id, c) => {
      const text = `result ${id} ${'r'.repeat(t.resultBytes[c])}`;
      const blocks: any[] = [{ type: 'text', text }];
      if (t.image) blocks.push({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'A'.repeat(3_000) } });
      return { type: 'tool_result', tool_use_id: id, content: t.resultAsBlocks || t.image ? blocks : text, ...(c === 0 ? mark : {}) };
    });
    msgs.push({
      role: 'user',
      content: [...results, ...(t.reminder ? [{ type: 'text', text: '<system-reminder>x</system-reminder>' }] : [])],
    });
  });
  return {
    model: 'claude-test',
    messages: msgs,
    system: [{ type: 'text', text: 'You are Claude Code.', cache_control: CC }],
    tools: [{ name: 'Read', input_schema: { type: 'object' }, cache_control: CC }],
    max_tokens: 32_000,
    thinking: { type: 'enabled', budget_tokens: 4_000 },
    future_field: 1,
  };
}

it('every compacted Messages request is well formed, strips stale signed thinking but the open round\u2019s, and adds no breakpoint', async () => {
  const config = validateConfig({ compaction: { strategy: 'fallback' } });
  const outcomes = new Map<string, number>();
  await fc.assert(
    fc.asyncProperty(requestArb, async (r) => {
      const json = build(r);
      const body = Buffer.from(JSON.stringify(json));
      const limitTokens = Math.max(1, Math.floor((body.length * r.shrinkTo) / 4));
      const limits =
        r.reason === 'context_length'
          ? { limitTokens, promptTokens: Math.ceil(body.length / 4) }
          : { limitBytes: Math.floor(body.length * r.shrinkTo) };
      const target = sizeTarget({ reason: r.reason, limits, bodyBytes: body.length, requested: dialect.completion(json) }, undefined, 0.6);
      const result = await compact(
        { dialect: dialect, request: json, conversation: dialect.read(json)!, bodyBytes: body.length },
        { target, because: 'a test', compaction: config.compaction, summary: config.summarizer, deadline: new AbortController().signal },
        // The fallback asks no summarizer.
        { wire: dialect.summarizer, model: 'm', send: () => Promise.reject(new Error('the fallback asks no summarizer')) },
      );
      const key = result.outcome === 'compacted' ? 'compacted' : result.why;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
      if (result.outcome !== 'compacted') return;
      const replay = JSON.parse(result.body.toString('utf8'));
      expect(result.body.length).toBeLessThan(target.fitBytes);
      expectWellFormed(replay.messages);
      expect(dialect.problems(replay.messages)).toEqual([]);
      expect(countBreakpoints(replay)).toBeLessThanOrEqual(countBreakpoints(json));
      const signed = (m: any) => m.role === 'assistant' && m.content.some((b: any) => b.type !== 'text' && b.type !== 'tool_use');
      // Signed blocks before the first changed message stay; after it every one is stale:
      // stripped, except the open tool round's, whose thinking must lead it with thinking enabled
      // (kept whole, under drop_block). After a plain user turn nothing signed is kept there.
      const changed = replay.messages.findIndex((m: any, i: number) => JSON.stringify(m) !== JSON.stringify(json.messages[i]));
      const head = replay.messages
        .slice(0, changed < 0 ? undefined : changed)
        .filter(signed)
        .map((m: any) => JSON.stringify(m));
      const lastAssistant = json.messages.findLast((m: any) => m.role === 'assistant');
      const inLoop = json.messages.at(-1).content.some?.((b: any) => b.type === 'tool_result');
      const isOpen = inLoop && signed(lastAssistant) && !head.includes(JSON.stringify(lastAssistant));
      const open = isOpen ? [JSON.stringify(lastAssistant)] : [];
      expect(replay.messages.filter(signed).map((m: any) => JSON.stringify(m))).toEqual([...head, ...open]);
      const { messages: _a, thinking: thinkingBefore, ...before } = json;
      const { messages: _b, thinking: thinkingAfter, ...after } = replay;
      expect(JSON.stringify(after)).toBe(JSON.stringify(before));
      expect(thinkingAfter).toEqual(
        open.length > 0 ? { ...thinkingBefore, block_binding: { prefix_mismatch_behavior: 'drop_block' } } : thinkingBefore,
      );
    }),
    { numRuns: 250 },
  );
  // The generator must reach both sides, or the property says little.
  expect(outcomes.get('compacted') ?? 0, JSON.stringify([...outcomes])).toBeGreaterThan(50);
});
