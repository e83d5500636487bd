import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One request as the fake upstream received it. */
export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Parsed body when it was JSON. */
  json: any;
  /** Resolves when the client side (the gateway) closed the connection before the response ended. */
  aborted: Promise<void>;
}

export type Handler = (req: Received, res: ServerResponse, raw: IncomingMessage) => void | Promise<void>;

export interface FakeUpstream {
  /** http://127.0.0.1:PORT */
  origin: string;
  /** origin + '/v1', what a gateway's upstream.url points at. */
  baseUrl: string;
  received: Received[];
  handle(handler: Handler): void;
  /** Open sockets right now (to check nothing is left open). */
  openSockets(): number;
  close(): Promise<void>;
}

/** A scriptable OpenAI-like upstream on a loopback port that records what it receives. */
export async function startFakeUpstream(handler: Handler = (_req, res) => json(res, 200, completion('ok'))): Promise<FakeUpstream> {
  let current = handler;
  const received: Received[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer(async (raw, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of raw) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      parsed = undefined;
    }
    const aborted = new Promise<void>((resolve) => {
      res.once('close', () => {
        if (!res.writableFinished) resolve();
      });
    });
    const req: Received = { method: raw.method ?? '', url: raw.url ?? '', headers: raw.headers, body, json: parsed, aborted };
    received.push(req);
    try {
      await current(req, res, raw);
    } catch (err) {
      if (!res.headersSent) json(res, 599, { error: { message: `fake upstream handler threw: ${(err as Error).message}` } });
      else res.destroy();
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    baseUrl: `${origin}/v1`,
    received,
    handle: (h) => {
      current = h;
    },
    openSockets: () => sockets.size,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function completion(content: string, id = 'chatcmpl-fake-1') {
  return {
    id,
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'fake-model',
    choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 },
  };
}

/** SSE events of a streamed completion: role, one per piece of content, finish, usage, [DONE]. */
export function streamEvents(pieces: string[], id = 'chatcmpl-fake-stream'): string[] {
  const base = { id, object: 'chat.completion.chunk', created: 1_700_000_000, model: 'fake-model' };
  const events = [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
    ...pieces.map((content) => ({ ...base, choices: [{ index: 0, delta: { content }, finish_reason: null }] })),
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
    { ...base, choices: [], usage: { prompt_tokens: 12, completion_tokens: pieces.length, total_tokens: 12 + pieces.length } },
  ];
  return [...events.map((e) => `data: ${JSON.stringify(e)}\n\n`), 'data: [DONE]\n\n'];
}

/** Writes SSE events one write each, optionally waiting between them. */
export async function sse(res: ServerResponse, events: string[], gapMs = 0): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const event of events) {
    if (res.destroyed) return;
    res.write(event);
    if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
  }
  res.end();
}
