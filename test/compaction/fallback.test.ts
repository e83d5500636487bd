import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clampSummaryText, fallbackSummaryText, summaryIntro } from '../../src/compaction/fallback.js';
import { itemsBytes, jsonBytes } from '../../src/compaction/size.js';
import { chat, type ChatMessage } from '../../src/dialects/chat.js';
import { responses } from '../../src/dialects/responses.js';
import type { Dialect } from '../../src/dialects/types.js';
import { agentConversation, calls, conversationArb, rCall, rOutput, rReasoning, rSay, rUser, responsesConversationArb, result, say, user } from './conversations.js';

const escaped = (text: string): number => jsonBytes(text) - 2;
const digest = (dialect: Dialect, items: unknown[], maxBytes: number): string =>
  fallbackSummaryText(items.map((i) => dialect.render(i)), itemsBytes(items), maxBytes);

function bashCall(id: string, command: string): ChatMessage {
  return { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command }) } }] };
}

describe('fallbackSummaryText', () => {
  const middle: ChatMessage[] = [
    user('  \n  Fix the failing test in src/a.ts  \nMore details here'),
    calls('one', 'two'),
    result('one'),
    result('two'),
    bashCall('three', 'npm test'),
    result('three'),
    { role: 'assistant', content: null, tool_calls: [{ id: 'w', type: 'function', function: { name: 'write_file', arguments: '{"file_path":"docs/x.md","paths":["a","b"]}' } }] },
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
    const items = [rUser('Fix the failing test'), rReasoning('1'), rCall('one'), rCall('two'), rOutput('one'), rOutput('two'), rSay('done')];
    const text = digest(responses, items.filter((i) => i.type !== 'reasoning'), 10_000);
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
});
