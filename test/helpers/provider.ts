import type { ServerResponse } from 'node:http';
import { completion, json, sse, startFakeUpstream, streamEvents, type FakeUpstream, type Received } from './fake-upstream.js';

/** How the fake provider says "too long". */
export type RejectStyle = 'openai_400' | 'json_413' | 'nginx_413' | 'anthropic_400' | 'sse_in_band';

export interface ProviderOptions {
  /** Requests whose body is larger than this many bytes are rejected. */
  limitBytes: number;
  style?: RejectStyle;
  /** What the summarizer (the same fake, called with x-gateway-compaction: summarizer) does. */
  summarizer?: (req: Received, res: ServerResponse) => void | Promise<void>;
  answer?: string;
}

export interface FakeProvider extends FakeUpstream {
  chatCalls(): Received[];
  summarizerCalls(): Received[];
}

const BYTES_PER_TOKEN = 4;

export const NGINX_413 =
  '<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n<center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>nginx/1.26.1</center>\r\n</body>\r\n</html>\r\n';

/** An OpenAI-like provider with a small context window, which also plays the summarizer. */
export async function startProvider(options: ProviderOptions): Promise<FakeProvider> {
  const style = options.style ?? 'openai_400';
  const upstream = await startFakeUpstream(async (req, res) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer') {
      return (options.summarizer ?? defaultSummarizer)(req, res);
    }
    if (req.body.length > options.limitBytes) return reject(res, style, req.body.length, options.limitBytes);
    if (req.json?.stream) return sse(res, streamEvents(['rescued', ' answer']));
    return json(res, 200, completion(options.answer ?? 'rescued answer'));
  });
  return {
    ...upstream,
    chatCalls: () => upstream.received.filter((r) => r.headers['x-gateway-compaction'] !== 'summarizer'),
    summarizerCalls: () => upstream.received.filter((r) => r.headers['x-gateway-compaction'] === 'summarizer'),
  };
}

export function defaultSummarizer(req: Received, res: ServerResponse): void {
  const input = String(req.json?.messages?.at(-1)?.content ?? '');
  json(res, 200, completion(`SUMMARY of ${input.length} chars: the user asked to fix the build.`, 'chatcmpl-summary'));
}

function reject(res: ServerResponse, style: RejectStyle, bytes: number, limitBytes: number): void {
  const tokens = Math.ceil(bytes / BYTES_PER_TOKEN);
  const limit = Math.floor(limitBytes / BYTES_PER_TOKEN);
  switch (style) {
    case 'openai_400':
      return json(res, 400, {
        error: {
          message: `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      });
    case 'anthropic_400':
      return json(res, 400, {
        type: 'error',
        error: { type: 'invalid_request_error', message: `prompt is too long: ${tokens} tokens > ${limit} maximum` },
      });
    case 'json_413':
      return json(res, 413, { error: { type: 'request_too_large', message: 'Request exceeds the maximum size' } });
    case 'nginx_413':
      res.writeHead(413, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_413) });
      res.end(NGINX_413);
      return;
    case 'sse_in_band':
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(
        `data: ${JSON.stringify({ error: { message: `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${tokens} tokens.`, type: 'invalid_request_error', code: 'context_length_exceeded' } })}\n\n`,
      );
      return;
  }
}
