import { connect } from 'node:net';
import type { ServerResponse } from 'node:http';
import { expect } from 'vitest';
import { Agent, request } from 'undici';
import { completion, json, sse, streamEvents, type Handler } from '../helpers/fake-upstream.js';

export { freePort as deadPort } from '../helpers/ports.js';

/** The process's active handles and requests, counted by type (TCPSocketWrap, Timeout, ...). */
function resources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) counts[type] = (counts[type] ?? 0) + 1;
  return counts;
}

/** `resources()` once sockets closing from earlier work have settled (two equal reads 50 ms apart). */
export async function settledResources(): Promise<Record<string, number>> {
  let last = JSON.stringify(resources());
  for (let i = 0; i < 40; i++) {
    await sleep(50);
    const now = JSON.stringify(resources());
    if (now === last) break;
    last = now;
  }
  return JSON.parse(last);
}

export interface TrackedHandler {
  handler: Handler;
  /** Upstream responses begun and neither finished nor closed: work the gateway left hanging. */
  unfinished(): number;
}

/**
 * Wraps a fake-upstream handler so that every response closes its connection when done (no idle
 * keep-alive sockets muddy the handle count) and unfinished responses can be counted.
 */
export function tracked(inner: Handler): TrackedHandler {
  let open = 0;
  const handler: Handler = async (req, res, raw) => {
    open++;
    res.once('close', () => open--);
    res.setHeader('connection', 'close');
    await inner(req, res, raw);
  };
  return { handler, unfinished: () => open };
}

/**
 * Nothing left open: every upstream response the gateway started is over, and once the test's
 * own client connections are closed the process holds no more sockets or timers than before.
 */
export async function expectNothingLeftOpen(baseline: Record<string, number>, unfinished: () => number, client: Client): Promise<void> {
  expect(await settle(unfinished, (n) => n === 0), 'upstream responses left unfinished').toBe(0);
  await client.close();
  const above = () => {
    const now = resources();
    return {
      sockets: Math.max(0, (now.TCPSocketWrap ?? 0) - (baseline.TCPSocketWrap ?? 0)),
      timers: Math.max(0, (now.Timeout ?? 0) - (baseline.Timeout ?? 0)),
    };
  };
  expect(await settle(above, (a) => a.sockets === 0 && a.timers === 0), 'handles above the baseline').toEqual({ sockets: 0, timers: 0 });
}

/** Reads `read()` every 20 ms until `done` holds or `timeoutMs` passes; returns the last value. */
export async function settle<T>(read: () => T, done: (value: T) => boolean, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = read();
  while (!done(value) && Date.now() < deadline) {
    await sleep(20);
    value = read();
  }
  return value;
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

/** A test client on its own undici Agent, so its keep-alive sockets can be closed and counted. */
export class Client {
  readonly agent = new Agent({ keepAliveTimeout: 10 });

  async post(url: string, body: string | Buffer | object, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Answer> {
    const res = await request(url, {
      method: 'POST',
      dispatcher: this.agent,
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
      signal,
    });
    const text = await res.body.text();
    return { status: res.statusCode, headers: res.headers, text, json: parse(text) };
  }

  /** Starts a request and hands back its response as soon as the headers arrive. */
  open(url: string, body: object, signal: AbortSignal) {
    return request(url, {
      method: 'POST',
      dispatcher: this.agent,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

export function parse(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Sends raw bytes to a server and collects whatever comes back until it closes (or the timeout). */
export function rawHttp(origin: string, text: string | Buffer, timeoutMs = 2_000): Promise<string> {
  const url = new URL(origin);
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname, () => socket.write(text));
    let out = '';
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    socket.setEncoding('latin1');
    socket.on('data', (d) => (out += d));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    socket.on('error', () => undefined);
  });
}

/** Status code and body of a raw HTTP/1.1 response. */
export function rawStatus(response: string): { status: number; body: string } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1] ?? 0);
  return { status, body: response.slice(response.indexOf('\r\n\r\n') + 4) };
}

/** The OpenAI error shape every gateway-made error must have. */
export function expectOpenAIError(body: any, code: string): void {
  expect(body?.error).toMatchObject({ code, message: expect.any(String), type: expect.any(String) });
  expect(body.error).toHaveProperty('param');
}

/** A gateway error in Anthropic's shape (on /v1/messages): `{type: "error", error: {type, message}}`, the gateway's code beside them. */
export function expectAnthropicError(body: any, code: string, type: string): void {
  expect(body).toMatchObject({ type: 'error', error: { type, message: expect.any(String), code } });
}

/** A gateway error in Google's shape (on /v1beta): `{error: {code: status, message, status, details: [ErrorInfo]}}`. */
export function expectGoogleError(body: any, code: string, status: number, statusName: string): void {
  expect(body?.error).toMatchObject({ code: status, message: expect.any(String), status: statusName });
  expect(body.error.details).toEqual([
    { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: code.toUpperCase(), domain: 'compaction-gateway' },
  ]);
}

/** Resolves after `ms`. */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Writes to `res` until the reader stops reading or `total` bytes went out; returns the count. */
export async function writeUntilBlocked(res: ServerResponse, total: number, chunk = Buffer.alloc(64 * 1024, 'x')): Promise<number> {
  let sent = 0;
  while (sent < total && !res.destroyed) {
    const ok = res.write(chunk);
    sent += chunk.length;
    if (!ok && !(await drained(res, 2_000))) break;
  }
  return sent;
}

/** True once `res` drains; false if it closes or stays blocked for `ms`. */
function drained(res: ServerResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (value: boolean) => {
      clearTimeout(timer);
      res.off('drain', onDrain).off('close', onClose);
      resolve(value);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    const timer = setTimeout(() => done(false), ms);
    res.on('drain', onDrain).on('close', onClose);
  });
}

export const LIMIT_BYTES = 60_000;

/** An OpenAI-style context-length rejection for a body of `bytes`. */
export function overlongError(bytes: number, limitBytes = LIMIT_BYTES): string {
  return JSON.stringify({
    error: {
      message: `This model's maximum context length is ${Math.floor(limitBytes / 4)} tokens. However, your messages resulted in ${Math.ceil(bytes / 4)} tokens. Please reduce the length of the messages.`,
      type: 'invalid_request_error',
      param: 'messages',
      code: 'context_length_exceeded',
    },
  });
}

export interface ProviderScript {
  /** What the summarizer call (x-gateway-compaction: summarizer) gets. */
  summarizer?: Handler;
  /** What a chat call that fits gets (default: a completion, or a stream when asked). */
  fits?: Handler;
  limitBytes?: number;
}

/**
 * A tracked provider with a small window that also plays the summarizer: bodies above the limit
 * get a context-length 400, others an answer.
 */
export function provider(script: ProviderScript = {}): TrackedHandler {
  const limit = script.limitBytes ?? LIMIT_BYTES;
  return tracked(async (req, res, raw) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer') {
      return (script.summarizer ?? ((_q, r) => json(r, 200, completion('SUMMARY: the user is fixing the build.'))))(req, res, raw);
    }
    if (req.body.length > limit) return json(res, 400, overlongError(req.body.length, limit));
    if (script.fits) return script.fits(req, res, raw);
    return req.json?.stream ? sse(res, streamEvents(['rescued', ' answer'])) : json(res, 200, completion('rescued answer'));
  });
}
