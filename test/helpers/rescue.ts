import { expect } from 'vitest';
import { validateCompaction } from '../../src/compaction/validate.js';
import { chat } from '../../src/dialects/chat.js';
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
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id: `call_${t}`, type: 'function', function: { name: 'read_file', arguments: `{"path":"src/f${t}.ts"}` } }] });
    messages.push({ role: 'tool', tool_call_id: `call_${t}`, content: output(t) });
  }
  messages.push({ role: 'user', content: 'And now?' });
  return { model: 'fake-model', messages, max_tokens: 300, ...extra };
}

/** A call the gateway made to its summarizer (marked so on the wire), not a client's request. */
export const isSummarizer = (r: Received): boolean => r.headers['x-gateway-compaction'] === 'summarizer';

/** Parses an RFC 8941 dictionary of tokens and integers, as the gateway writes it. */
export function parseCompactionHeader(value: string | null): Record<string, string | number> {
  expect(value, 'x-gateway-compaction header').toBeTruthy();
  const out: Record<string, string | number> = {};
  for (const member of value!.split(',')) {
    const match = /^\s*([a-z*][a-z0-9_.*-]*)=([A-Za-z*][\w:/!#$%&'*+.^`|~-]*|-?\d{1,15})\s*$/.exec(member);
    expect(match, `dictionary member ${JSON.stringify(member)}`).not.toBeNull();
    out[match![1]] = /^-?\d+$/.test(match![2]) ? Number(match![2]) : match![2];
  }
  return out;
}

/**
 * Checks a replayed request against the rejected one: valid, smaller, same parameters. Masking
 * keeps every message in place (placeholders stand in for old tool outputs); a summary stands in
 * for several messages, so there are fewer.
 */
export function expectValidReplay(rejected: Received, replay: Received, header = /outcome=replayed/): void {
  const original = rejected.json.messages as unknown[];
  const compacted = replay.json.messages as unknown[];
  expect(validateCompaction(chat, original, compacted)).toEqual([]);
  if (/strategy=mask\b/.test(String(replay.headers['x-gateway-compaction']))) {
    expect(compacted.length).toBe(original.length);
    expect(JSON.stringify(compacted)).toContain('[tool output omitted by compaction-gateway: ');
  } else {
    expect(compacted.length).toBeLessThan(original.length);
  }
  expect(replay.body.length).toBeLessThan(rejected.body.length);
  const { messages: _a, ...paramsBefore } = rejected.json;
  const { messages: _b, ...paramsAfter } = replay.json;
  expect(paramsAfter).toEqual(paramsBefore);
  expect(Object.keys(replay.json)).toEqual(Object.keys(rejected.json));
  expect(replay.headers.authorization).toBe(rejected.headers.authorization);
  expect(replay.headers['x-gateway-compaction']).toMatch(header);
}
