import type { ServerResponse } from 'node:http';
import { json, startFakeUpstream, type FakeUpstream, type Received } from './fake-upstream.js';
import { NGINX_413 } from './nginx.js';

/*
 * A fake Anthropic Messages API on a loopback port: a context window measured at 4 bytes a token,
 * the rejections Anthropic (and its edge) send, answers and streams in the API's own shape, and
 * the summarizer's answers (calls marked x-gateway-compaction: summarizer).
 */

/** How the fake says "too long". */
export type AnthropicReject =
  | 'prompt_too_long' // 400 invalid_request_error "prompt is too long: N tokens > M maximum"
  | 'input_plus_max_tokens' // 400 "input length and `max_tokens` exceed context limit: A + B > C"
  | 'json_413' // 413 request_too_large, Anthropic's envelope
  | 'edge_413' // 413 from an edge proxy, as HTML
  | 'sse_error'; // 200 stream: message_start, ping, then event: error (non-stream requests get the 400)

export interface AnthropicOptions {
  /** Bodies larger than this are over the window (the window is limitBytes / 4 tokens). */
  limitBytes: number;
  style: AnthropicReject;
  answer?: string;
}

export interface FakeAnthropic extends FakeUpstream {
  messageCalls(): Received[];
  summarizerCalls(): Received[];
}

export const BYTES_PER_TOKEN = 4;
export const tokensOf = (bytes: number) => Math.ceil(bytes / BYTES_PER_TOKEN);

export async function startAnthropic(options: AnthropicOptions): Promise<FakeAnthropic> {
  const upstream = await startFakeUpstream(async (req, res) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer') return summarizerAnswer(req, res);
    const window = Math.floor(options.limitBytes / BYTES_PER_TOKEN);
    const prompt = tokensOf(req.body.length);
    if (options.style === 'input_plus_max_tokens') {
      const maxTokens = Number(req.json?.max_tokens ?? 0);
      if (prompt + maxTokens > window) return reject(res, options.style, prompt, window, maxTokens, req.json?.stream);
    } else if (req.body.length > options.limitBytes) {
      return reject(res, options.style, prompt, window, 0, req.json?.stream);
    }
    const text = options.answer ?? 'rescued answer';
    if (req.json?.stream) return messageStream(res, message(text, prompt));
    return json(res, 200, message(text, prompt));
  });
  return {
    ...upstream,
    messageCalls: () => upstream.received.filter((r) => r.headers['x-gateway-compaction'] !== 'summarizer'),
    summarizerCalls: () => upstream.received.filter((r) => r.headers['x-gateway-compaction'] === 'summarizer'),
  };
}

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

function messageStream(res: ServerResponse, m: ReturnType<typeof message>): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  // One write per event, as the API flushes them.
  for (const e of streamOf(m)) res.write(e);
  res.end();
}

export function promptTooLong(prompt: number, window: number) {
  return { type: 'error', error: { type: 'invalid_request_error', message: `prompt is too long: ${prompt} tokens > ${window} maximum` } };
}

function reject(res: ServerResponse, style: AnthropicReject, prompt: number, window: number, maxTokens: number, stream: unknown): void {
  switch (style) {
    case 'prompt_too_long':
      return json(res, 400, { ...promptTooLong(prompt, window), request_id: 'req_fake' });
    case 'input_plus_max_tokens': {
      const message = `input length and \`max_tokens\` exceed context limit: ${prompt} + ${maxTokens} > ${window}, decrease input length or \`max_tokens\` and try again`;
      return json(res, 400, { type: 'error', error: { type: 'invalid_request_error', message } });
    }
    case 'json_413':
      return json(res, 413, { type: 'error', error: { type: 'request_too_large', message: 'Request exceeds the maximum allowed number of bytes.' } });
    case 'edge_413':
      res.writeHead(413, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_413) });
      res.end(NGINX_413);
      return;
    case 'sse_error':
      if (!stream) return json(res, 400, promptTooLong(prompt, window));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(streamOf(message('', prompt))[0]);
      res.write(event('ping', {}));
      res.end(`event: error\ndata: ${JSON.stringify(promptTooLong(prompt, window))}\n\n`);
      return;
  }
}

function summarizerAnswer(req: Received, res: ServerResponse): void {
  const transcript = String(req.json?.messages?.[0]?.content ?? '');
  json(res, 200, message(`SUMMARY of ${transcript.length} chars: the user asked for a review of src/.`, tokensOf(req.body.length), 'msg_summary'));
}

// The Messages replay validator is the messages row's of the scenario table; kept here under its old names.
export { countBreakpoints, expectValidMessagesReplay, expectWellFormed } from '../scenarios/apis/messages.js';

/** The summary the gateway put in a replay: always inside a user turn. */
export function summaryTurn(body: any): any {
  const holds = (m: any) => JSON.stringify(m.content).includes('[compaction-gateway]');
  return (body.messages as any[]).find(holds);
}
