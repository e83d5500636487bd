import { describe, expect, it } from 'vitest';
import { jsonBytes } from '../../src/compaction/size.js';
import type { ChatMessage } from '../../src/compaction/types.js';
import { agentConversation } from './conversations.js';

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
