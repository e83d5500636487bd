import { describe, expect, it } from 'vitest';
import { chat } from '../../src/dialects/chat.js';
import { gemini } from '../../src/dialects/gemini.js';
import { messages } from '../../src/dialects/messages.js';
import { responses } from '../../src/dialects/responses.js';
import { lastCount } from '../../src/dialects/parts.js';

/* The prompt count each API's answers report, whole or streamed, as the gateway reads it off their text. */

describe('promptCount', () => {
  it('chat completions: usage.prompt_tokens of a body, and of the usage chunk that ends a stream', () => {
    const body = {
      id: 'c',
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 8191, completion_tokens: 5, total_tokens: 8196 },
    };
    expect(chat.promptCount(JSON.stringify(body))).toBe(8191);
    const stream = [
      `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'ok' }, finish_reason: null }] })}\n\n`,
      `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 4096, completion_tokens: 1, total_tokens: 4097 } })}\n\n`,
      'data: [DONE]\n\n',
    ].join('');
    expect(chat.promptCount(stream)).toBe(4096);
    expect(chat.promptCount('data: {"choices":[]}\n\n')).toBeUndefined();
  });

  it('a count the model wrote in its content is escaped, never read', () => {
    const body = { choices: [{ message: { content: 'set "prompt_tokens": 5 in the config' } }], usage: { prompt_tokens: 9000 } };
    expect(chat.promptCount(JSON.stringify(body))).toBe(9000);
    expect(chat.promptCount(JSON.stringify({ choices: [{ message: { content: '"prompt_tokens": 5' } }] }))).toBeUndefined();
  });

  it('Responses: usage.input_tokens of the completed response', () => {
    const completed = {
      type: 'response.completed',
      response: { status: 'completed', usage: { input_tokens: 30000, input_tokens_details: { cached_tokens: 29000 }, output_tokens: 10 } },
    };
    expect(responses.promptCount(`event: response.completed\ndata: ${JSON.stringify(completed)}\n\n`)).toBe(30000);
    expect(responses.promptCount(JSON.stringify({ type: 'response.created', response: { usage: null } }))).toBeUndefined();
  });

  it('Messages: input_tokens with the cache reads and writes, from message_start or a whole body', () => {
    const start = {
      type: 'message_start',
      message: { usage: { input_tokens: 12, cache_creation_input_tokens: 2000, cache_read_input_tokens: 40000, output_tokens: 1 } },
    };
    expect(messages.promptCount(`event: message_start\ndata: ${JSON.stringify(start)}\n\n`)).toBe(42012);
    expect(messages.promptCount(JSON.stringify({ type: 'message', usage: { input_tokens: 700, output_tokens: 3 } }))).toBe(700);
  });

  it('Gemini: usageMetadata.promptTokenCount, the last chunk of a stream', () => {
    const chunk = (n: number) =>
      `data: ${JSON.stringify({ candidates: [], usageMetadata: { promptTokenCount: n, candidatesTokenCount: 1, totalTokenCount: n + 1 } })}\r\n\r\n`;
    expect(gemini.promptCount(chunk(100) + chunk(5000))).toBe(5000);
  });

  it('lastCount reads whole numbers only, after the key and its colon', () => {
    expect(lastCount('{"a":1.5}', 'a')).toBeUndefined();
    expect(lastCount('{"a" : 17 }', 'a')).toBe(17);
    expect(lastCount('{"a":"17"}', 'a')).toBeUndefined();
    expect(lastCount('{"a":3,"b":{"a":null}}', 'a')).toBe(3);
  });
});
