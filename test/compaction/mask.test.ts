import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compact, type CompactionResult } from '../../src/compaction/index.js';
import { maskOutputs } from '../../src/compaction/mask.js';
import { SummarizerError } from '../../src/compaction/summarizer-port.js';
import { itemsBytes } from '../../src/compaction/size.js';
import type { SizeTarget } from '../../src/compaction/size-target.js';
import { validateCompaction } from '../../src/compaction/validate.js';
import { validateConfig } from '../../src/config/load.js';
import { chat } from '../../src/dialects/chat.js';
import { gemini } from '../../src/dialects/gemini.js';
import { messages } from '../../src/dialects/messages.js';
import { responses } from '../../src/dialects/responses.js';
import type { Dialect } from '../../src/dialects/types.js';
import { settingsOf } from './fake-summarizer.js';
import { conversationArb, deepFreeze, responsesConversationArb, system, user } from './conversations.js';

/*
 * The masking rung: old tool outputs become one line each, oldest first, until the conversation is
 * under the aim; nothing else changes, and no summarizer is asked.
 */

const bash = (id: string, command: string) => ({
  role: 'assistant',
  content: null,
  tool_calls: [{ id, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command }) } }],
});
const output = (id: string, content: string) => ({ role: 'tool', tool_call_id: id, content });
const rounds = (n: number, bytes: number) =>
  Array.from({ length: n }, (_, i) => [
    bash(`c${i}`, `cat src/f${i}.ts`),
    output(`c${i}`, `${`line ${i}\n`.repeat(bytes / 7)}Exit code: 0`),
  ]).flat();

describe('maskOutputs', () => {
  const items = deepFreeze([system('rules'), user('read every file'), ...rounds(6, 4000)]);
  const entries = items.map((i) => chat.describe(i));
  const mask = (aimBytes: number) => maskOutputs({ items, entries, dialect: chat, keepFirst: 2, aimBytes });

  it('masks the oldest outputs first, and only as many as the aim needs', async () => {
    const before = itemsBytes(items);
    const masked = (await mask(before - 5000))!;
    expect(masked.masked).toBe(2);
    expect(masked.end).toBe(6);
    expect(itemsBytes(masked.items)).toBeLessThanOrEqual(before - 5000);
    expect(masked.items[3]).toEqual({
      role: 'tool',
      tool_call_id: 'c0',
      content: '[tool output omitted by compaction-gateway: bash, 4.6 KB; cat src/f0.ts; exit 0]',
    });
    // Everything else as it was: the calls, the later outputs.
    expect(masked.items.filter((m, i) => m !== items[i]).map((m) => (m as { tool_call_id: string }).tool_call_id)).toEqual(['c0', 'c1']);
  });

  it('never masks the last unit, and says null when the aim cannot be reached without it', async () => {
    const all = await mask(0);
    expect(all).toBeNull();
    const most = (await mask(itemsBytes(items) - 5 * 3900))!;
    expect(most.masked).toBe(5);
    expect(most.items.at(-1)).toBe(items.at(-1));
  });

  it('leaves what is already under the aim alone (null: nothing to do)', async () => {
    expect(await mask(itemsBytes(items) + 1)).toBeNull();
  });
});

describe('each API keeps its ids and shape, and only the outputs change', () => {
  const label = () => 'LINE';
  it('chat: the tool message content', () => {
    expect(chat.mask({ role: 'tool', tool_call_id: 'a', content: [{ type: 'text', text: 'x' }] }, label)).toEqual({
      role: 'tool',
      tool_call_id: 'a',
      content: 'LINE',
    });
    expect(chat.mask({ role: 'user', content: 'hi' }, label)).toBeNull();
  });
  it('responses: a function or custom tool output; never a screenshot', () => {
    expect(responses.mask({ type: 'function_call_output', call_id: 'a', output: 'x' }, label)).toEqual({
      type: 'function_call_output',
      call_id: 'a',
      output: 'LINE',
    });
    expect(responses.mask({ type: 'computer_call_output', call_id: 'a', output: { type: 'computer_screenshot' } }, label)).toBeNull();
  });
  it('messages: each tool_result block, is_error and cache_control kept; the person\u2019s text blocks as sent', () => {
    const item = {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'a', content: [{ type: 'text', text: 'x' }], is_error: true },
        { type: 'tool_result', tool_use_id: 'b', content: 'y', cache_control: { type: 'ephemeral' } },
        { type: 'text', text: 'and fix it' },
      ],
    };
    const ids: string[] = [];
    expect(messages.mask(item, (o) => (ids.push(`${o.id}:${o.text}`), 'LINE'))).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'a', content: 'LINE', is_error: true },
        { type: 'tool_result', tool_use_id: 'b', content: 'LINE', cache_control: { type: 'ephemeral' } },
        { type: 'text', text: 'and fix it' },
      ],
    });
    expect(ids).toEqual(['a:x', 'b:y']);
    expect(messages.mask({ role: 'assistant', content: [{ type: 'text', text: 'x' }] }, label)).toBeNull();
  });
  it('gemini: the functionResponse response, its id and name kept', () => {
    const item = {
      role: 'user',
      parts: [{ functionResponse: { id: 'a', name: 'read_file', response: { output: 'x' } } }, { text: 'more' }],
    };
    expect(gemini.mask(item, label)).toEqual({
      role: 'user',
      parts: [{ functionResponse: { id: 'a', name: 'read_file', response: { output: 'LINE' } } }, { text: 'more' }],
    });
  });
});

describe('compact() with masking on', () => {
  const run = async (dialect: Dialect, request: Record<string, unknown>, fitBytes: number, mask = true) => {
    const bodyBytes = Buffer.byteLength(JSON.stringify(request));
    const target: SizeTarget = {
      fitBytes,
      aimBytes: Math.floor(fitBytes * 0.6),
      bytesPerToken: 4,
      tokensBefore: bodyBytes / 4,
      source: 'stated',
    };
    const config = validateConfig({ compaction: { mask } });
    // Nothing listens there: a summary would fall back, and say so.
    const unreachable = async (): Promise<never> => {
      throw new SummarizerError('unreachable', 'the summarizer could not be reached (ECONNREFUSED)', 0);
    };
    return compact({ dialect, request, conversation: dialect.read(request)!, bodyBytes }, settingsOf(config, target), {
      wire: dialect.summarizer,
      model: 'm',
      send: unreachable,
    });
  };

  it('brings the request under its aim with no summarizer call, every item in place', async () => {
    const request = deepFreeze({ model: 'm', messages: [system('rules'), user('read every file'), ...rounds(8, 4000)] });
    const result = (await run(chat, request, 30_000)) as Extract<CompactionResult, { outcome: 'compacted' }>;
    expect(result).toMatchObject({ outcome: 'compacted', strategy: 'mask', summarizerCalls: 0, cut: 0 });
    expect(result.summarizerFailure).toBeUndefined();
    const sent = JSON.parse(result.body.toString()).messages;
    expect(sent).toHaveLength(request.messages.length);
    expect(result.body.length).toBeLessThanOrEqual(18_000);
    expect(validateCompaction(chat, request.messages, sent)).toEqual([]);
    expect(sent.at(-1)).toEqual(request.messages.at(-1));
    expect(result.newSpan).toMatchObject({ fixedEnd: 2, pinnedOffsets: [], strategy: 'mask', summarizerCalls: 0 });
  });

  it('summarises when masking every older output is not enough (here: the digest, the summarizer being down)', async () => {
    const request = deepFreeze({ model: 'm', messages: [system('rules'), user('read every file'), ...rounds(8, 4000)] });
    const result = await run(chat, request, 6_000);
    expect(result).toMatchObject({ outcome: 'compacted', strategy: 'fallback', summarizerFailure: 'unreachable' });
  });

  it('off: the summarizer is asked, as before', async () => {
    const request = deepFreeze({ model: 'm', messages: [system('rules'), user('read every file'), ...rounds(8, 4000)] });
    expect(await run(chat, request, 30_000, false)).toMatchObject({
      outcome: 'compacted',
      strategy: 'fallback',
      summarizerFailure: 'unreachable',
    });
  });
});

describe('whatever the conversation', () => {
  it.each<[string, Dialect, fc.Arbitrary<unknown[]>]>([
    ['chat', chat, conversationArb],
    ['responses', responses, responsesConversationArb],
  ])(
    '%s: a masked list is valid for its API, the same length, smaller, its last unit and every non-output item as sent',
    async (_, dialect, conversations) => {
      await fc.assert(
        fc.asyncProperty(conversations, fc.double({ min: 0, max: 1, noNaN: true }), fc.boolean(), async (items, share, all) => {
          const entries = items.map((i) => dialect.describe(i));
          const masked = await maskOutputs({ items, entries, dialect, keepFirst: 1, aimBytes: Math.floor(itemsBytes(items) * share), all });
          if (!masked) return;
          expect(masked.items).toHaveLength(items.length);
          expect(validateCompaction(dialect, items, masked.items)).toEqual([]);
          expect(itemsBytes(masked.items)).toBeLessThan(itemsBytes(items));
          masked.items.forEach((item, i) => {
            if (item !== items[i]) expect(entries[i].answers.length, `item ${i} changed`).toBeGreaterThan(0);
            if (item !== items[i]) expect(dialect.describe(item)).toEqual(entries[i]);
          });
          expect(masked.items.at(-1)).toBe(items.at(-1));
        }),
        { numRuns: 150, seed: 11 },
      );
    },
  );
});
