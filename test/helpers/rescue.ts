import { agentConversation } from '../compaction/conversations.js';
import type { Received } from './fake-upstream.js';

/** A realistic agent request: system prompt, tools with a strict schema, a long tool-call history. */
export function agentRequest(turns: number, extra: Record<string, unknown> = {}, toolOutputBytes = 2_000) {
  return {
    model: 'fake-model',
    messages: agentConversation({ turns, toolOutputBytes, seed: turns, endWith: 'tool' }),
    tools: [
      {
        type: 'function',
        function: {
          name: 'read_file',
          description: 'Read a file',
          strict: true,
          parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'], additionalProperties: false },
        },
      },
    ],
    max_tokens: 500,
    temperature: 0.2,
    ...extra,
  };
}

/**
 * A coding agent's chat request: system prompt, task, `turns` read_file calls each answered by
 * `output(t)`, then a last question.
 */
export function toolTurnsBody(turns: number, output: (turn: number) => string, extra: Record<string, unknown> = {}) {
  const messages: unknown[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Fix the failing build.' },
  ];
  for (let t = 0; t < turns; t++) {
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: `call_${t}`, type: 'function', function: { name: 'read_file', arguments: `{"path":"src/f${t}.ts"}` } }],
    });
    messages.push({ role: 'tool', tool_call_id: `call_${t}`, content: output(t) });
  }
  messages.push({ role: 'user', content: 'And now?' });
  return { model: 'fake-model', messages, max_tokens: 300, ...extra };
}

/** A call the gateway made to its summarizer (marked so on the wire), not a client's request. */
export const isSummarizer = (r: Received): boolean => r.headers['x-gateway-compaction'] === 'summarizer';

// The chat replay validator is the chat row's of the scenario table; kept here under its old name.
export { expectValidChatReplay as expectValidReplay } from '../scenarios/apis/chat.js';
export { parseCompactionHeader } from './compaction-header.js';
