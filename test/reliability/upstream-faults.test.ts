import { createServer, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { completion, json, sse, startFakeUpstream, streamEvents, type FakeUpstream, type Received } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';
import {
  Client,
  deadPort,
  expectNothingLeftOpen,
  expectOpenAIError,
  settledResources,
  sleep,
  tracked,
  writeUntilBlocked,
  type Answer,
} from './helpers.js';

/*
 * The upstream misbehaving in every way a socket allows. For each: what the client gets, that
 * the next normal request still works, and that nothing is left open afterwards.
 */

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const OVERLONG_HTML = `<html><body><h1>413 Request Entity Too Large</h1>${'<!-- padding -->'.repeat(1_300_000)}</body></html>`;

type Fault = (req: Received, res: ServerResponse) => void | Promise<void>;

interface Case {
  name: string;
  fault: Fault;
  body?: object;
  expectAnswer: (answer: Answer | Error) => void;
}

const cases: Case[] = [
  {
    name: 'resets the connection before the headers -> 502 upstream_unreachable',
    fault: (_req, res) => void res.socket!.resetAndDestroy(),
    expectAnswer: (a) => expectGatewayError(a, 502, 'upstream_unreachable'),
  },
  {
    name: 'closes the connection before the headers -> 502 upstream_unreachable',
    fault: (_req, res) => void res.socket!.destroy(),
    expectAnswer: (a) => expectGatewayError(a, 502, 'upstream_unreachable'),
  },
  {
    name: 'sends a malformed status line -> 502 upstream_bad_response',
    fault: (_req, res) => void res.socket!.end('HTTP/1.1 2OO OK\r\nfoo\r\n\r\n'),
    expectAnswer: (a) => expectGatewayError(a, 502, 'upstream_bad_response'),
  },
  {
    name: 'sends an invalid content-length -> 502 upstream_bad_response',
    fault: (_req, res) => void res.socket!.end('HTTP/1.1 200 OK\r\ncontent-length: nope\r\n\r\n{}'),
    expectAnswer: (a) => expectGatewayError(a, 502, 'upstream_bad_response'),
  },
  {
    name: 'sends a body shorter than its content-length, then closes -> the client sees the cut',
    fault: (_req, res) => void res.socket!.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{"id":'),
    expectAnswer: (a) => expect(a).toBeInstanceOf(Error),
  },
  {
    name: 'sends 200 headers then stalls (idle timeout) -> 504 upstream_timeout',
    fault: (_req, res) => void res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' }).flushHeaders(),
    expectAnswer: (a) => expectGatewayError(a, 504, 'upstream_timeout'),
  },
  {
    name: 'sends 400 headers then stalls (idle timeout) -> 504 upstream_timeout',
    fault: (_req, res) => void res.writeHead(400, { 'content-type': 'application/json', 'content-length': '100' }).flushHeaders(),
    expectAnswer: (a) => expectGatewayError(a, 504, 'upstream_timeout'),
  },
  {
    name: 'sends SSE headers then stalls before any event -> 504 upstream_timeout',
    body: { ...chat, stream: true },
    fault: (_req, res) => void res.writeHead(200, { 'content-type': 'text/event-stream' }).flushHeaders(),
    expectAnswer: (a) => expectGatewayError(a, 504, 'upstream_timeout'),
  },
  {
    name: 'stalls mid-stream after an event reached the client -> the client sees the cut',
    body: { ...chat, stream: true },
    fault: (_req, res) => void res.writeHead(200, { 'content-type': 'text/event-stream' }).write(streamEvents(['a'])[0]),
    expectAnswer: (a) => expect(a).toBeInstanceOf(Error),
  },
  {
    name: 'resets mid-stream -> the client sees the cut, not a clean end',
    body: { ...chat, stream: true },
    fault: async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const event of streamEvents(['one', 'two']).slice(0, 3)) res.write(event);
      await sleep(30);
      res.socket!.resetAndDestroy();
    },
    expectAnswer: (a) => expect(a).toBeInstanceOf(Error),
  },
  {
    name: 'ends a stream cleanly without [DONE] -> relayed as it came, clean end, nothing invented',
    body: { ...chat, stream: true },
    fault: (_req, res) => sse(res, streamEvents(['one', 'two']).slice(0, -1)),
    expectAnswer: (a) => {
      expect(a).not.toBeInstanceOf(Error);
      const answer = a as Answer;
      expect(answer.status).toBe(200);
      expect(answer.text).toBe(streamEvents(['one', 'two']).slice(0, -1).join(''));
      expect(answer.text).not.toContain('[DONE]');
    },
  },
  {
    name: 'answers an 8 MB error body -> status and body relayed whole, streamed past the held 1 MiB',
    fault: async (_req, res) => {
      const head = '{"error":{"message":"invalid model","type":"invalid_request_error","code":"model_not_found","pad":"';
      res.writeHead(404, { 'content-type': 'application/json', 'content-length': String(head.length + 8 * 1024 * 1024 + 3) });
      res.write(head);
      await writeUntilBlocked(res, 8 * 1024 * 1024);
      res.end('"}}');
    },
    expectAnswer: (a) => {
      const answer = a as Answer;
      expect(answer.status).toBe(404);
      expect(answer.text.startsWith('{"error":{"message":"invalid model"')).toBe(true);
      expect(answer.text.length).toBeGreaterThan(8 * 1024 * 1024);
      expect(answer.text.endsWith('"}}')).toBe(true);
    },
  },
];

let upstream: FakeUpstream | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
  gateway = upstream = undefined;
});

function expectGatewayError(a: Answer | Error, status: number, code: string): void {
  expect(a, String(a)).not.toBeInstanceOf(Error);
  const answer = a as Answer;
  expect({ status: answer.status, code: answer.json?.error?.code }).toEqual({ status, code });
  expectOpenAIError(answer.json, code);
}

async function attempt(client: Client, body: object): Promise<Answer | Error> {
  return client.post(`${gateway!.baseUrl}/chat/completions`, body).catch((err: Error) => err);
}

describe('the upstream misbehaves; the gateway survives', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    let faulty = true;
    const upstreamSide = tracked(async (req, res) => {
      if (req.headers['x-gateway-compaction'] === 'summarizer') return json(res, 200, completion('summary'));
      if (faulty) return c.fault(req, res);
      return req.json?.stream ? sse(res, streamEvents(['ok'])) : json(res, 200, completion('ok'));
    });
    upstream = await startFakeUpstream(upstreamSide.handler);
    gateway = await startGateway({ upstream: { url: upstream.baseUrl, firstByteTimeoutMs: 2_000, idleTimeoutMs: 300 } });
    const baseline = await settledResources();
    const client = new Client();

    c.expectAnswer(await attempt(client, c.body ?? chat));

    faulty = false;
    const next = await client.post(`${gateway.baseUrl}/chat/completions`, { ...chat, stream: true });
    expect(next.status).toBe(200);
    expect(next.text).toContain('[DONE]');
    await expectNothingLeftOpen(baseline, upstreamSide.unfinished, client);
    expect(gateway.logLines().filter((l) => l.level >= 50)).toEqual([]);
  });

  it('refuses the connection -> 502; once it listens again, the next request works', async () => {
    const port = await deadPort();
    gateway = await startGateway({ upstream: { url: `http://127.0.0.1:${port}/v1` } });
    const client = new Client();
    expectGatewayError(await attempt(client, chat), 502, 'upstream_unreachable');
    const revived = createServer((_req, res) => json(res, 200, completion('back')));
    await new Promise<void>((r) => revived.listen(port, '127.0.0.1', r));
    try {
      const next = await client.post(`${gateway.baseUrl}/chat/completions`, chat);
      expect(next.json.choices[0].message.content).toBe('back');
    } finally {
      await client.close();
      revived.closeAllConnections();
      await new Promise((r) => revived.close(r));
    }
  });

  it('an endless error body: the client gets the status before the upstream ends (the hold is bounded)', async () => {
    let stop!: () => void;
    const stopped = new Promise<void>((r) => (stop = r));
    upstream = await startFakeUpstream(async (_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.write('{"error":{"message":"upstream exploded","pad":"');
      while (!res.destroyed) {
        await writeUntilBlocked(res, 1024 * 1024);
        await Promise.race([stopped, sleep(5)]);
      }
    });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl, errorBodyLimitBytes: 64 * 1024 } });
    const client = new Client();
    const abort = new AbortController();
    const res = await client.open(`${gateway.baseUrl}/chat/completions`, chat, abort.signal);
    expect(res.statusCode).toBe(500);
    let text = '';
    for await (const chunk of res.body) {
      text += chunk;
      if (text.length > 256 * 1024) break;
    }
    expect(text.startsWith('{"error":{"message":"upstream exploded"')).toBe(true);
    abort.abort();
    stop();
    await expect.poll(() => upstream!.openSockets()).toBe(0);
    await client.close();
  });

  it('a 413 whose 20 MB HTML body is mostly padding is still recognised and rescued', async () => {
    const upstreamSide = tracked((req, res) => {
      if (req.headers['x-gateway-compaction'] === 'summarizer') return json(res, 200, completion('summary'));
      if (req.body.length < 60_000) return json(res, 200, completion('rescued'));
      res.writeHead(413, { 'content-type': 'text/html', 'content-length': String(OVERLONG_HTML.length) });
      res.end(OVERLONG_HTML);
    });
    upstream = await startFakeUpstream(upstreamSide.handler);
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
    const baseline = await settledResources();
    const client = new Client();
    const answer = await client.post(`${gateway.baseUrl}/chat/completions`, agentRequest(60));
    expect(answer.status).toBe(200);
    expect(answer.json.choices[0].message.content).toBe('rescued');
    expect(parseCompactionHeader(answer.headers['x-gateway-compaction'] as string)).toMatchObject({
      outcome: 'replayed',
      reason: 'body_too_large',
    });
    await expectNothingLeftOpen(baseline, upstreamSide.unfinished, client);
  });
});
