import type { ServerResponse } from 'node:http';
import { completion, json, startFakeUpstream, type FakeUpstream, type Received } from './fake-upstream.js';

/*
 * A scripted OpenAI Responses API upstream on a loopback port: answers JSON or an SSE stream of
 * Responses events, and refuses a body over `limitBytes` the ways real deployments do.
 */

export type ResponsesReject = 'openai_400' | 'json_413' | 'failed_in_stream' | 'error_event_in_stream';

export interface ResponsesProviderOptions {
  limitBytes: number;
  style?: ResponsesReject;
  answer?: string;
  /** The summarizer (called with x-gateway-compaction: summarizer) answers with this text. */
  summary?: string;
}

export interface ResponsesProvider extends FakeUpstream {
  calls(): Received[];
  summarizerCalls(): Received[];
}

export function responseObject(text: string, status = 'completed', id = 'resp_fake_1') {
  return {
    id,
    object: 'response',
    created_at: 1_700_000_000,
    status,
    model: 'fake-model',
    output:
      status === 'completed'
        ? [{ type: 'message', id: 'msg_fake_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] }]
        : [],
    usage: { input_tokens: 12, input_tokens_details: { cached_tokens: 0 }, output_tokens: 3, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 },
    error: null,
    incomplete_details: null,
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
  };
}

export function event(type: string, fields: Record<string, unknown>, sequence: number): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence, ...fields })}\n\n`;
}

/** The events before any output: what the gateway holds while it may still change its mind. */
export function preamble(id = 'resp_fake_1'): string[] {
  return [
    event('response.created', { response: responseObject('', 'in_progress', id) }, 0),
    event('response.in_progress', { response: responseObject('', 'in_progress', id) }, 1),
  ];
}

/** A whole successful stream, one text delta per piece. */
export function streamOf(pieces: string[], id = 'resp_fake_1'): string[] {
  const item = { type: 'message', id: 'msg_fake_1', status: 'in_progress', role: 'assistant', content: [] };
  let n = 2;
  const text = pieces.join('');
  return [
    ...preamble(id),
    event('response.output_item.added', { output_index: 0, item }, n++),
    event('response.content_part.added', { item_id: 'msg_fake_1', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } }, n++),
    ...pieces.map((delta) => event('response.output_text.delta', { item_id: 'msg_fake_1', output_index: 0, content_index: 0, delta, logprobs: [] }, n++)),
    event('response.output_text.done', { item_id: 'msg_fake_1', output_index: 0, content_index: 0, text, logprobs: [] }, n++),
    event('response.content_part.done', { item_id: 'msg_fake_1', output_index: 0, content_index: 0, part: { type: 'output_text', text, annotations: [] } }, n++),
    event('response.output_item.done', { output_index: 0, item: { ...item, status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] } }, n++),
    event('response.completed', { response: responseObject(text, 'completed', id) }, n++),
  ];
}

export const CONTEXT_WINDOW_MESSAGE = 'Your input exceeds the context window of this model. Please adjust your input and try again.';

export function failedInStream(id = 'resp_fake_1'): string[] {
  const failed = { ...responseObject('', 'failed', id), error: { code: 'context_length_exceeded', message: CONTEXT_WINDOW_MESSAGE } };
  return [...preamble(id), event('response.failed', { response: failed }, 2)];
}

export function errorEventInStream(): string[] {
  return [event('response.created', { response: responseObject('', 'in_progress') }, 0), event('error', { code: 'context_length_exceeded', message: CONTEXT_WINDOW_MESSAGE, param: 'input' }, 1)];
}

export function writeEvents(res: ServerResponse, events: string[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const e of events) res.write(e);
  res.end();
}

export async function startResponsesProvider(options: ResponsesProviderOptions): Promise<ResponsesProvider> {
  const style = options.style ?? 'openai_400';
  const upstream = await startFakeUpstream((req, res) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer') {
      const summary = options.summary ?? 'SUMMARY: the user asked for a review of every file.';
      if (req.url.endsWith('/chat/completions')) return json(res, 200, completion(summary, 'chatcmpl-summary'));
      return json(res, 200, responseObject(summary, 'completed', 'resp_summary'));
    }
    const stream = req.json?.stream === true;
    if (req.body.length > options.limitBytes) return reject(res, style, stream);
    if (stream) return writeEvents(res, streamOf([options.answer ?? 'rescued', ' answer']));
    return json(res, 200, responseObject(options.answer ?? 'rescued answer'));
  });
  const isSummarizer = (r: Received) => r.headers['x-gateway-compaction'] === 'summarizer';
  return { ...upstream, calls: () => upstream.received.filter((r) => !isSummarizer(r)), summarizerCalls: () => upstream.received.filter(isSummarizer) };
}

function reject(res: ServerResponse, style: ResponsesReject, stream: boolean): void {
  switch (style) {
    case 'openai_400':
      return json(res, 400, { error: { message: CONTEXT_WINDOW_MESSAGE, type: 'invalid_request_error', param: 'input', code: 'context_length_exceeded' } });
    case 'json_413':
      return json(res, 413, { error: { message: 'Request body too large.', type: 'invalid_request_error', code: 'request_too_large' } });
    case 'failed_in_stream':
      return stream ? writeEvents(res, failedInStream()) : json(res, 200, { ...responseObject('', 'failed'), error: { code: 'context_length_exceeded', message: CONTEXT_WINDOW_MESSAGE } });
    case 'error_event_in_stream':
      return stream ? writeEvents(res, errorEventInStream()) : json(res, 400, { error: { message: CONTEXT_WINDOW_MESSAGE, type: 'invalid_request_error', param: 'input', code: 'context_length_exceeded' } });
  }
}
