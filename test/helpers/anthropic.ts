/*
 * Pieces of the Anthropic Messages API's wire shapes for tests that script their own upstream: a
 * message, its stream's events and the "prompt is too long" error. Also the Messages replay
 * validator (countBreakpoints, expectWellFormed, expectValidMessagesReplay) under the names tests
 * import it by, and where a replay put its summary. A stand-in that enforces the API's rules is
 * test/helpers/strict-anthropic.ts.
 */

export function message(text: string, inputTokens: number, id = 'msg_fake_1') {
  return {
    id,
    type: 'message',
    role: 'assistant',
    model: 'claude-test',
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: inputTokens, output_tokens: 3 },
  };
}

export function event(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

/** The events of a streamed message, in the API's order. */
export function streamOf(m: ReturnType<typeof message>): string[] {
  const text = m.content[0].text;
  return [
    event('message_start', { message: { ...m, content: [], stop_reason: null, usage: { ...m.usage, output_tokens: 1 } } }),
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    event('ping', {}),
    event('content_block_delta', { index: 0, delta: { type: 'text_delta', text } }),
    event('content_block_stop', { index: 0 }),
    event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 3 } }),
    event('message_stop', {}),
  ];
}

export function promptTooLong(prompt: number, window: number) {
  return { type: 'error', error: { type: 'invalid_request_error', message: `prompt is too long: ${prompt} tokens > ${window} maximum` } };
}

// The Messages replay validator is the messages row's of the scenario table; kept here under its old names.
export { countBreakpoints, expectValidMessagesReplay, expectWellFormed } from '../scenarios/apis/messages.js';

/** The summary the gateway put in a replay: always inside a user turn. */
export function summaryTurn(body: any): any {
  const holds = (m: any) => JSON.stringify(m.content).includes('[compaction-gateway]');
  return (body.messages as any[]).find(holds);
}
