import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clampSummaryText, fallbackSummaryText, summaryIntro } from '../../src/compaction/fallback.js';
import { itemsBytes, jsonBytes } from '../../src/compaction/size.js';
import { chat, type ChatMessage } from '../../src/dialects/chat.js';
import { responses } from '../../src/dialects/responses.js';
import type { Dialect, Rendered } from '../../src/dialects/types.js';
import {
  agentConversation,
  calls,
  conversationArb,
  rCall,
  rOutput,
  rReasoning,
  rSay,
  rUser,
  responsesConversationArb,
  result,
  say,
  user,
} from './conversations.js';

const escaped = (text: string): number => jsonBytes(text) - 2;
const digest = (dialect: Dialect, items: unknown[], maxBytes: number): string =>
  fallbackSummaryText(
    items.map((i) => dialect.render(i)),
    itemsBytes(items),
    maxBytes,
  );

const who = (w: string, text: string, calls: Rendered['calls'] = []): Rendered => ({ who: w, text, calls });
const call = (name: string, args: unknown, id = 'c'): Rendered['calls'][number] => ({
  id,
  name,
  args: typeof args === 'string' ? args : JSON.stringify(args),
});
const HEAD = (messages: number, tokens: number | string) =>
  `${messages} message${messages === 1 ? '' : 's'} (about ${tokens} tokens) were condensed without a model summary; what follows is a mechanical digest.`;

function bashCall(id: string, command: string): ChatMessage {
  return {
    role: 'assistant',
    content: null,
    tool_calls: [{ id, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command }) } }],
  };
}

describe('fallbackSummaryText', () => {
  const middle: ChatMessage[] = [
    user('  \n  Fix the failing test in src/a.ts  \nMore details here'),
    calls('one', 'two'),
    result('one'),
    result('two'),
    bashCall('three', 'npm test'),
    result('three'),
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'w', type: 'function', function: { name: 'write_file', arguments: '{"file_path":"docs/x.md","paths":["a","b"]}' } },
      ],
    },
    result('w'),
    user([{ type: 'text', text: `Then ${'very '.repeat(100)}long` }]),
    say('ok'),
  ];

  it('states what was omitted and the tool calls by name, nothing else (the trail has the rest)', () => {
    expect(digest(chat, middle, 10_000)).toBe(
      [
        `10 messages (about ${Math.round(itemsBytes(middle) / 4)} tokens) were condensed without a model summary; what follows is a mechanical digest.`,
        'Tool calls: 4 (read_file 2, bash 1, write_file 1).',
      ].join('\n'),
    );
  });

  it('reads Responses items the same way, and never the reasoning items', () => {
    const items = [
      rUser('Fix the failing test'),
      rReasoning('1'),
      rCall('one'),
      rCall('two'),
      rOutput('one'),
      rOutput('two'),
      rSay('done'),
    ];
    const text = digest(
      responses,
      items.filter((i) => i.type !== 'reasoning'),
      10_000,
    );
    expect(text).toContain('6 messages');
    expect(text).toContain('Tool calls: 2 (read_file 2).');
  });

  it('is deterministic', () => {
    const messages = agentConversation({ turns: 50, toolOutputBytes: 300, seed: 9 });
    expect(digest(chat, messages, 3000)).toBe(digest(chat, structuredClone(messages), 3000));
  });

  it.each<[string, Dialect, fc.Arbitrary<unknown[]>]>([
    ['chat', chat, conversationArb],
    ['responses', responses, responsesConversationArb],
  ])('%s: never exceeds maxBytes, however small', (_, dialect, conversations) => {
    fc.assert(
      fc.property(conversations, fc.integer({ min: 0, max: 3000 }), (items, maxBytes) => {
        expect(escaped(digest(dialect, items, maxBytes))).toBeLessThanOrEqual(maxBytes);
      }),
      { numRuns: 60, seed: 5 },
    );
  });

  // The digest's exact lines, as the model after the compaction reads them: how the head counts
  // and how the tool line is ordered and capped.
  describe('its lines', () => {
    it('one message, no tool calls; tokens are a quarter of the bytes, rounded', () => {
      expect(fallbackSummaryText([who('assistant', 'ok')], 10, 10_000)).toBe(`${HEAD(1, 3)}\nNo tool calls.`);
      expect(fallbackSummaryText([who('assistant', 'ok'), who('assistant', 'ok')], 4_002, 10_000)).toBe(
        `${HEAD(2, '1,001')}\nNo tool calls.`,
      );
      expect(fallbackSummaryText([who('assistant', 'ok')], 4_000_000, 10_000)).toBe(`${HEAD(1, '1,000,000')}\nNo tool calls.`);
    });

    it('tools by use, most used first, ties by name; a call without a name is "unnamed"; twelve shown, then how many more', () => {
      const calls = [
        ...['zeta', 'alpha', 'mid', 'alpha', '', 'zeta', 'zeta'].map((n) => call(n, '{}')),
        ...Array.from({ length: 12 }, (_, i) => call(`t${String(i).padStart(2, '0')}`, '{}')),
      ];
      const text = fallbackSummaryText([who('assistant', '', calls)], 0, 10_000);
      expect(text.split('\n')[1]).toBe(
        'Tool calls: 19 (zeta 3, alpha 2, mid 1, t00 1, t01 1, t02 1, t03 1, t04 1, t05 1, t06 1, t07 1, t08 1, and 4 more tools).',
      );
      const twelve = Array.from({ length: 12 }, (_, i) => call(`t${String(i).padStart(2, '0')}`, '{}'));
      expect(fallbackSummaryText([who('assistant', '', twelve)], 0, 10_000).split('\n')[1]).toBe(
        'Tool calls: 12 (t00 1, t01 1, t02 1, t03 1, t04 1, t05 1, t06 1, t07 1, t08 1, t09 1, t10 1, t11 1).',
      );
      expect(fallbackSummaryText([who('assistant', '', [call('', '{}')])], 0, 10_000).split('\n')[1]).toBe('Tool calls: 1 (unnamed 1).');
    });

    it('a tool used 1,234 times is counted with a thousands separator', () => {
      const calls = Array.from({ length: 1234 }, () => call('bash', '{}'));
      expect(fallbackSummaryText([who('assistant', '', calls)], 0, 10_000).split('\n')[1]).toBe('Tool calls: 1,234 (bash 1,234).');
    });
  });
});

describe('summaryIntro', () => {
  it('says the summary is the gateway\u2019s, how many earlier messages it stands for, and why', () => {
    expect(summaryIntro(1234, 'the request exceeded the model\u2019s context window')).toBe(
      '[compaction-gateway] The 1,234 earlier messages of this conversation were condensed by the gateway because the request exceeded the model\u2019s context window. Summary:\n\n',
    );
    expect(summaryIntro(1, 'x')).toContain('The earlier message of this conversation was condensed');
  });
});

describe('clampSummaryText', () => {
  it.each([chat, responses])('with the intro, gives a $api summary item of at most the reserve', (dialect) => {
    fc.assert(
      fc.property(fc.string({ maxLength: 5000 }), fc.integer({ min: 400, max: 5000 }), fc.nat({ max: 5000 }), (text, reserve, n) => {
        // How compact() sizes the summary item: the reserve less the item holding only the intro.
        const intro = summaryIntro(n, 'a test');
        const budget = Math.max(0, reserve - jsonBytes(dialect.summaryItem(intro, 'user')));
        expect(jsonBytes(dialect.summaryItem(intro + clampSummaryText(text, budget), 'user'))).toBeLessThanOrEqual(reserve);
      }),
      { seed: 3 },
    );
  });

  it('clamps at the end with a marker, and leaves short texts alone', () => {
    expect(clampSummaryText('short', 100)).toBe('short');
    const clamped = clampSummaryText('x'.repeat(1000), 100);
    expect(clamped).toMatch(/^x+\n\[\.\.\. summary truncated by compaction-gateway \.\.\.\]$/);
    expect(escaped(clamped)).toBeLessThanOrEqual(100);
    expect(clampSummaryText('y'.repeat(1000), 10)).toBe('y'.repeat(10));
  });

  describe('at the budget', () => {
    const MARKER = '\n[... summary truncated by compaction-gateway ...]';

    it('keeps a text that escapes to exactly the budget; one byte over is cut to the budget with the marker', () => {
      expect(clampSummaryText('abc"', 5)).toBe('abc"');
      const cut = clampSummaryText(`${'a'.repeat(100)}"`, 100);
      expect(cut).toBe(`${'a'.repeat(100 - escaped(MARKER))}${MARKER}`);
      expect(escaped(cut)).toBe(100);
    });

    it('with less room than the marker itself: the text cut to the budget, no marker', () => {
      const room = escaped(MARKER) - 1;
      expect(clampSummaryText('b'.repeat(500), room)).toBe('b'.repeat(room));
      expect(clampSummaryText('b'.repeat(500), escaped(MARKER))).toBe(MARKER);
    });
  });
});
