import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  clampSummaryText,
  fallbackSummaryText,
  summaryMessage,
  summaryTextBudget,
} from '../../src/compaction/fallback.js';
import { jsonBytes, messagesBytes } from '../../src/compaction/size.js';
import type { ChatMessage } from '../../src/compaction/types.js';
import { agentConversation, calls, conversationArb, result, say, user } from './conversations.js';

const escaped = (text: string): number => jsonBytes(text) - 2;

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

  it('states what was omitted, the tool calls by name, the user requests and the paths', () => {
    const text = fallbackSummaryText(middle, 10_000);
    expect(text).toBe(
      [
        `10 messages (about ${Math.round(messagesBytes(middle) / 4)} tokens) were condensed without a model summary; what follows is a mechanical digest.`,
        'Tool calls: 4 (read_file 2, bash 1, write_file 1).',
        '',
        'Requests from the user, in order:',
        '- Fix the failing test in src/a.ts',
        `- ${`Then ${'very '.repeat(100)}long`.slice(0, 200)}…`,
        '',
        'Files and paths named in tool calls:',
        '- src/one.ts',
        '- src/two.ts',
        '- docs/x.md',
        '- a',
        '- b',
      ].join('\n'),
    );
  });

  it('is deterministic', () => {
    const messages = agentConversation({ turns: 50, toolOutputBytes: 300, seed: 9 });
    expect(fallbackSummaryText(messages, 3000)).toBe(fallbackSummaryText(structuredClone(messages), 3000));
  });

  it('lists what fits and says how many more there were', () => {
    const many = Array.from({ length: 200 }, (_, i) => user(`request number ${i}`));
    const text = fallbackSummaryText(many, 1000);
    expect(escaped(text)).toBeLessThanOrEqual(1000);
    expect(text).toContain('- request number 0\n');
    const more = /\.\.\. and (\d+) more$/.exec(text);
    expect(more).not.toBeNull();
    expect(text.split('\n').filter((l) => l.startsWith('- request')).length + Number(more![1])).toBe(200);
  });

  it('never exceeds maxBytes, however small', () => {
    fc.assert(
      fc.property(conversationArb, fc.integer({ min: 0, max: 3000 }), (messages, maxBytes) => {
        expect(escaped(fallbackSummaryText(messages, maxBytes))).toBeLessThanOrEqual(maxBytes);
      }),
      { numRuns: 100 },
    );
  });
});

describe('summaryMessage', () => {
  it('wraps the text as a gateway summary of N earlier messages', () => {
    const message = summaryMessage('the gist', 1234, 'user');
    expect(message.role).toBe('user');
    expect(message.content).toMatch(/^\[compaction-gateway\] The 1,234 earlier messages of this conversation were condensed by the gateway/);
    expect(String(message.content).endsWith('Summary:\n\nthe gist')).toBe(true);
    expect(summaryMessage('x', 1, 'system').content).toContain('The earlier message of this conversation was condensed');
  });
});

describe('summaryTextBudget and clampSummaryText', () => {
  it('together give a summary message of at most the reserve', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 5000 }), fc.integer({ min: 250, max: 5000 }), fc.nat({ max: 5000 }), (text, reserve, n) => {
        const budget = summaryTextBudget(reserve, n, 'user');
        const message = summaryMessage(clampSummaryText(text, budget), n, 'user');
        expect(jsonBytes(message)).toBeLessThanOrEqual(reserve);
      }),
    );
  });

  it('clamps at the end with a marker, and leaves short texts alone', () => {
    expect(clampSummaryText('short', 100)).toBe('short');
    const clamped = clampSummaryText('x'.repeat(1000), 100);
    expect(clamped).toMatch(/^x+\n\[\.\.\. summary truncated by compaction-gateway \.\.\.\]$/);
    expect(escaped(clamped)).toBeLessThanOrEqual(100);
  });
});
