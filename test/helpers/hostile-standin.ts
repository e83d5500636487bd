import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/*
 * An OpenAI-like upstream on loopback for bodies of tens of megabytes: it refuses a body over
 * `limitBytes` as context_length_exceeded, answers a smaller one, and plays the summarizer (calls
 * marked `x-gateway-compaction: summarizer`). It never keeps a refused body, only its size and
 * the exact bytes of the error it sent back, so that a test can check a client got those bytes.
 */

interface ChatCall {
  /** Bytes of the request body as received. */
  bytes: number;
  status: number;
  /** The response body exactly as sent. */
  answer: Buffer;
  /** An accepted (small) body, parsed. */
  json?: any;
}

export interface HostileStandIn {
  /** What an `upstream.url` points at: origin + '/v1'. */
  baseUrl: string;
  chatCalls: ChatCall[];
  summarizerCalls(): number;
  summarizerBytes(): number;
  close(): Promise<void>;
}

const SUMMARY = 'SUMMARY: the user asked to fix the build; files src/a.ts and src/b.ts were edited.';

function completion(content: string) {
  return {
    id: 'chatcmpl-hostile',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-test',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}

/** The upstream's refusal: OpenAI's words, sized to the body it refuses. */
export function contextLengthError(bytes: number, limitBytes: number): Buffer {
  return Buffer.from(
    JSON.stringify({
      error: {
        message: `This model's maximum context length is ${limitBytes / 4} tokens. However, your messages resulted in ${Math.ceil(bytes / 4)} tokens. Please reduce the length of the messages.`,
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    }),
  );
}

/**
 * OpenAI's refusal of a conversation whose tool messages do not pair with the calls before them
 * (its wording, typo included), or null: a tool message must answer a call of the assistant
 * message before its run of tool messages, and every call must be answered before the next turn.
 */
function toolPairRefusal(json: unknown): Buffer | null {
  const messages = (json as { messages?: Array<{ role?: string; tool_calls?: Array<{ id: string }>; tool_call_id?: string }> })?.messages;
  if (!Array.isArray(messages)) return null;
  const refuse = (message: string, at: number) =>
    Buffer.from(JSON.stringify({ error: { message, type: 'invalid_request_error', param: `messages.[${at}].role`, code: null } }));
  let open = new Set<string>();
  let openedAt = -1;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (m.role === 'tool') {
      if (!open.delete(String(m.tool_call_id)))
        return refuse("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", i);
      continue;
    }
    if (open.size > 0) {
      return refuse(
        `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...open].join(', ')}`,
        openedAt,
      );
    }
    open = new Set((m.tool_calls ?? []).map((c) => c.id));
    openedAt = i;
  }
  return open.size > 0
    ? refuse(
        `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...open].join(', ')}`,
        openedAt,
      )
    : null;
}

export async function startHostileStandIn(limitBytes = 1_000_000): Promise<HostileStandIn> {
  const chatCalls: ChatCall[] = [];
  let summarizerCalls = 0;
  let summarizerBytes = 0;
  const sockets = new Set<Socket>();
  const send = (res: ServerResponse, status: number, body: Buffer) => {
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let bytes = 0;
    const kept: Buffer[] = [];
    const summarizer = req.headers['x-gateway-compaction'] === 'summarizer';
    // OpenAI's answer to a path it does not serve (a window discovery's GET): no chat call.
    if (req.method !== 'POST') {
      req.resume();
      return send(
        res,
        404,
        Buffer.from(
          JSON.stringify({
            error: { message: `Invalid URL (${req.method} ${req.url})`, type: 'invalid_request_error', param: null, code: null },
          }),
        ),
      );
    }
    req.on('data', (c: Buffer) => {
      bytes += c.length;
      if (bytes <= limitBytes) kept.push(c);
    });
    req.on('end', () => {
      if (summarizer) {
        summarizerCalls++;
        summarizerBytes += bytes;
        return send(res, 200, Buffer.from(JSON.stringify(completion(SUMMARY))));
      }
      if (bytes > limitBytes) {
        const answer = contextLengthError(bytes, limitBytes);
        chatCalls.push({ bytes, status: 400, answer });
        return send(res, 400, answer);
      }
      let json: unknown;
      try {
        json = JSON.parse(Buffer.concat(kept).toString('utf8'));
      } catch {
        json = undefined;
      }
      // As strict as OpenAI about the replay's tool pairs: its exact refusals.
      const refusal = toolPairRefusal(json);
      const status = refusal ? 400 : 200;
      const answer = refusal ?? Buffer.from(JSON.stringify(completion('rescued answer')));
      chatCalls.push({ bytes, status, answer, json });
      send(res, status, answer);
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    chatCalls,
    summarizerCalls: () => summarizerCalls,
    summarizerBytes: () => summarizerBytes,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
