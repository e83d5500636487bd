import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { jsonBytes } from '../../src/compaction/size.js';
import type { ChatMessage } from '../../src/dialects/chat.js';
import { responses } from '../../src/dialects/responses.js';
import { agentConversation, responsesConversationArb } from './conversations.js';

/** Every tool result answers a call of the assistant message right before its run, and every call is answered. */
function toolPairsProblems(messages: ChatMessage[]): string[] {
  const problems: string[] = [];
  let waiting = new Set<string>();
  for (const [i, m] of messages.entries()) {
    if (m.role === 'tool') {
      if (!waiting.delete(String(m.tool_call_id))) problems.push(`#${i} answers nothing`);
      continue;
    }
    if (waiting.size > 0) problems.push(`#${i} comes before results for ${[...waiting].join(', ')}`);
    waiting = new Set((m.tool_calls ?? []).map((c) => c.id));
  }
  return problems;
}

describe('agentConversation', () => {
  const messages = agentConversation({ turns: 40, toolOutputBytes: 2000, seed: 42, developer: true, endWith: 'user' });

  it('is a valid conversation with the shapes real agents send', () => {
    expect(toolPairsProblems(messages)).toEqual([]);
    expect(messages.slice(0, 3).map((m) => m.role)).toEqual(['system', 'developer', 'user']);
    expect(messages.at(-1)?.role).toBe('user');
    const json = JSON.stringify(messages);
    expect(json).toContain('"content":null,"tool_calls"');
    expect(json).toContain('data:image/png;base64,');
    expect(json).toContain('"name":"alice"');
    expect(json).toContain('"x_latency_ms"');
    expect(json).toContain('"reasoning_content"');
    expect(messages.some((m) => m.role === 'tool' && Array.isArray(m.content))).toBe(true);
    expect(messages.filter((m) => m.role === 'user').length).toBeGreaterThan(2);
  });

  it('depends only on its options', () => {
    expect(agentConversation({ turns: 40, toolOutputBytes: 2000, seed: 42, developer: true, endWith: 'user' })).toEqual(messages);
    expect(agentConversation({ turns: 40, toolOutputBytes: 2000, seed: 43, developer: true, endWith: 'user' })).not.toEqual(messages);
  });

  it('ends with tool results by default, like an agent loop waiting for the model', () => {
    const loop = agentConversation({ turns: 5, toolOutputBytes: 100, seed: 1 });
    expect(loop.at(-1)?.role).toBe('tool');
    expect(toolPairsProblems(loop)).toEqual([]);
    expect(jsonBytes(loop)).toBeLessThan(20_000);
  });
});

describe('responsesConversationArb', () => {
  it('gives Responses input the API accepts: parallel calls then their outputs, reasoning before a turn', () => {
    const seen = { reasoning: 0, parallel: 0, partsOutput: 0 };
    fc.assert(
      fc.property(responsesConversationArb, (items) => {
        const conversation = responses.read({ model: 'm', input: items });
        expect(conversation).not.toBeNull();
        const entries = conversation!.entries;
        const called = new Set<string>();
        for (const e of entries) {
          e.calls.forEach((id) => called.add(id));
          for (const id of e.answers) expect(called.delete(id)).toBe(true);
        }
        expect([...called]).toEqual([]);
        entries.forEach((e, i) => {
          if (e.joinsNext) {
            seen.reasoning++;
            expect(entries[i + 1]?.role).toMatch(/assistant/);
          }
          if (e.calls.length > 0 && entries[i + 1]?.calls.length > 0) seen.parallel++;
        });
        if (items.some((i) => i.type === 'function_call_output' && Array.isArray(i.output))) seen.partsOutput++;
      }),
      { numRuns: 100, seed: 23 },
    );
    expect(seen.reasoning).toBeGreaterThan(20);
    expect(seen.parallel).toBeGreaterThan(20);
    expect(seen.partsOutput).toBeGreaterThan(10);
  });
});
