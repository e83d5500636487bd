import { createServer, type ServerResponse } from 'node:http';
import { announce, listenLoopback } from './child.js';
import { ACCEPT_ANY_SIZE, BAD_JSON_MESSAGE, HOLD_ANSWER, MODEL, SENT_AT_FIELD, type UpstreamConfig } from './upstream-config.js';

/*
 * The fake provider the proxies stand in front of: OpenAI-shaped JSON answers, SSE streams of
 * separate writes a few milliseconds apart, a context window (a 400 context_length_exceeded
 * for bodies over `limitBytes`), a summarizer that takes a fixed time per call and a model list.
 * Runs as its own process so that its CPU is nobody's cost.
 */

const config = JSON.parse(process.argv[2] ?? '{}') as UpstreamConfig;
const answerText = 'x'.repeat(Math.max(1, config.answerBytes - 330));
/**
 * Answers by request size: each counts the prompt as a provider would, a token per 4 bytes (the
 * window's own rate, reject()). A fixed count would tell the gateway that every large request was
 * silently cut (overlong/truncation.ts), which no real provider says (bench/findings.md, round 8).
 */
const answers = new Map<number, Buffer>();
function answerFor(bytes: number): Buffer {
  let answer = answers.get(bytes);
  if (!answer) {
    if (answers.size > 64) answers.clear();
    answers.set(bytes, (answer = Buffer.from(JSON.stringify(completion(answerText, Math.ceil(bytes / 4))))));
  }
  return answer;
}
const summary = Buffer.from(
  JSON.stringify(completion(`SUMMARY: the agent read files, ran the tests and fixed the build. ${'detail '.repeat(60)}`)),
);
const STREAM_MARK = Buffer.from('"stream":true');

/** The summarizer's own time: the union of the intervals in which it was answering a call. */
const summarizer = { calls: 0, busyMs: 0, active: 0, since: 0 };
/** Connections the proxies opened: a proxy that does not keep them alive pays for it. */
let connections = 0;
/** Requests whose answer has not closed yet: at rest, a proxy that left one behind leaks it. */
let unfinished = 0;
const models = Buffer.from(
  JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model', created: 1_700_000_000, owned_by: 'bench' }] }),
);

const server = createServer((req, res) => {
  unfinished++;
  res.once('close', () => unfinished--);
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
  });
  req.on('end', () => {
    if (req.method === 'GET' && req.url === '/v1/models') return sendJson(res, 200, models);
    if (req.headers['x-gateway-compaction'] === 'summarizer') return summarize(res);
    if (config.limitBytes !== undefined && size > config.limitBytes && !req.headers[ACCEPT_ANY_SIZE]) return reject(res, size);
    if (req.headers[HOLD_ANSWER]) return;
    const streamed = config.parseBodies ? parsedStream(Buffer.concat(chunks)) : isStream(chunks, size);
    if (streamed === undefined) return badJson(res);
    if (streamed) return void stream(res);
    const answer = answerFor(size);
    if (config.answerDelayMs) setTimeout(() => sendJson(res, 200, answer), config.answerDelayMs);
    else sendJson(res, 200, answer);
  });
});

function sendJson(res: ServerResponse, status: number, body: Buffer): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length });
  res.end(body);
}

function isStream(chunks: Buffer[], size: number): boolean {
  // Bench clients put `"stream":true` first; looking at the start spares a copy of large bodies.
  // A proxy that re-serialises the body (Portkey) moves it: a small body is searched whole.
  if (chunks.length === 0) return false;
  return chunks[0].subarray(0, 64).includes(STREAM_MARK) || (size <= SEARCHED_WHOLE && Buffer.concat(chunks).includes(STREAM_MARK));
}
const SEARCHED_WHOLE = 16 * 1024;

/** Whether the body asks for a stream; undefined when it is not JSON. */
function parsedStream(body: Buffer): boolean | undefined {
  try {
    return (JSON.parse(body.toString('utf8')) as { stream?: unknown }).stream === true;
  } catch {
    return undefined;
  }
}

function badJson(res: ServerResponse): void {
  sendJson(
    res,
    400,
    Buffer.from(JSON.stringify({ error: { message: BAD_JSON_MESSAGE, type: 'invalid_request_error', param: null, code: null } })),
  );
}

async function stream(res: ServerResponse): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (let i = 0; i < config.streamEvents - 1; i++) {
    if (res.destroyed) return;
    res.write(streamEvent(i));
    await sleep(config.streamGapMs);
  }
  res.end('data: [DONE]\n\n');
}

function streamEvent(i: number): string {
  const delta = i === 0 ? { role: 'assistant', content: '' } : { content: ` token${i}` };
  const event = {
    id: 'chatcmpl-bench',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model: MODEL,
    system_fingerprint: 'fp_bench',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: null }],
    [SENT_AT_FIELD]: performance.timeOrigin + performance.now(),
  };
  return `data: ${JSON.stringify(event)}\n\n`;
}

function summarize(res: ServerResponse): void {
  summarizer.calls++;
  if (summarizer.active++ === 0) summarizer.since = performance.now();
  setTimeout(() => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': summary.length });
    res.end(summary);
    if (--summarizer.active === 0) summarizer.busyMs += performance.now() - summarizer.since;
  }, config.summaryDelayMs);
}

function reject(res: ServerResponse, bytes: number): void {
  const limit = Math.floor(config.limitBytes! / 4);
  const tokens = Math.ceil(bytes / 4);
  const body = JSON.stringify({
    error: {
      message: `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
      type: 'invalid_request_error',
      param: 'messages',
      code: 'context_length_exceeded',
    },
  });
  res.writeHead(400, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function completion(content: string, promptTokens = 120) {
  return {
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: MODEL,
    choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: promptTokens, completion_tokens: 30, total_tokens: promptTokens + 30 },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// Keep-alive longer than the proxies' so that they, not the upstream, decide when to close.
server.keepAliveTimeout = config.keepAliveMs ?? 60_000;
server.on('connection', () => connections++);
await listenLoopback(server);
announce(server, () => ({ summarizerCalls: summarizer.calls, summarizerBusyMs: summarizer.busyMs, connections, unfinished }));
