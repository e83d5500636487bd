import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in for an LLM provider with a small context window, on a loopback port. It counts a
 * request's tokens as bytes / 4, rejects what does not fit the way OpenAI does, and answers the
 * gateway's summarizer calls with a short summary built from the text it was given.
 */
export interface DemoProvider {
  baseUrl: string;
  /** What it answered, in order: status and, for rejections, the error message. */
  log: Array<{ kind: 'chat' | 'summarizer'; status: number; tokens: number; error?: string }>;
  close(): Promise<void>;
}

export async function startDemoProvider(contextTokens: number): Promise<DemoProvider> {
  const log: DemoProvider['log'] = [];
  const server = createServer(async (req, res) => {
    const body = await read(req);
    const json = JSON.parse(body.toString('utf8'));
    const tokens = Math.ceil(body.length / 4);
    if (req.headers['x-gateway-compaction'] === 'summarizer') {
      log.push({ kind: 'summarizer', status: 200, tokens });
      return reply(res, 200, answer(summaryOf(String(json.messages.at(-1).content))));
    }
    if (tokens > contextTokens) {
      const error = `This model's maximum context length is ${contextTokens} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`;
      log.push({ kind: 'chat', status: 400, tokens, error });
      return reply(res, 400, { error: { message: error, type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } });
    }
    log.push({ kind: 'chat', status: 200, tokens });
    const step = /Step (\d+)/.exec(String(json.messages.at(-1)?.content))?.[1] ?? '?';
    return reply(res, 200, answer(`Done with step ${step}: I read the files and updated the tests. ${'Details follow. '.repeat(30)}`));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    log,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function summaryOf(transcript: string): string {
  const asks = [...transcript.matchAll(/\[user\]\n(.*)/g)].map((m) => `- ${m[1].slice(0, 80)}`);
  return `Goals so far:\n${asks.join('\n')}\nState: each step was completed; tests were updated.`;
}

function answer(content: string) {
  return {
    id: `chatcmpl-demo-${Date.now()}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: 'demo-model',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  };
}

async function read(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
