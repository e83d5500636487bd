import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import Fastify from 'fastify';
import { Agent } from 'undici';
import { announce, listenLoopback } from './child.js';
import { importDist } from './dist.js';

/*
 * The rescue's floor: floor.ts plus the two things no rescuing proxy can do without. It holds the
 * request body whole, as a replay needs it, and holds the answer until its first chunk has come,
 * as judging an answer before a byte of it is sent needs; an answer that came whole goes out in one
 * write. Nothing else: no framework, no log line, no metrics, no hop headers, no look at the
 * bytes. What a small request costs here above the floor is what any rescue costs; what the
 * gateway costs above this is its own (bench/findings.md, round 7). With `fastify: true`, the
 * same as a fastify route (no logger, no hooks): what the framework itself costs. With
 * `features: true`, on node:http or on fastify, each request also does what every gateway request
 * does, with the gateway's own built functions: a request id, the hop's headers both ways, the
 * three series prom-client counts, and the access line (to stdout, which the bench discards).
 * Both together are about the least a gateway with those features on fastify could cost.
 */

const { upstream, fastify, features } = JSON.parse(process.argv[2] ?? '{}') as { upstream: string; fastify?: boolean; features?: boolean };
const gateway = features ? await gatewayParts() : undefined;

async function gatewayParts() {
  const headers = await importDist<typeof import('../src/upstream/headers.js')>('upstream/headers');
  const { createMetrics } = await importDist<typeof import('../src/telemetry/metrics.js')>('telemetry/metrics');
  const { accessLogger } = await importDist<typeof import('../src/telemetry/access-log.js')>('telemetry/access-log');
  const { stdoutDestination } = await importDist<typeof import('../src/telemetry/log-destination.js')>('telemetry/log-destination');
  return { ...headers, metrics: createMetrics(), log: accessLogger('info', stdoutDestination('json', false)) };
}
const agent = new Agent({ keepAliveTimeout: 30_000, connections: null });
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
]);

function endToEnd(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  }
  return out;
}

/** The first chunk of an answer, or null at its end. */
function firstChunk(body: Readable): Promise<Buffer | null> {
  const ready = body.readableLength > 0 ? (body.read() as Buffer | null) : null;
  if (ready) return Promise.resolve(ready);
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      body.pause();
      done();
      resolve(chunk);
    };
    const onEnd = () => {
      done();
      resolve(null);
    };
    const done = () => body.off('data', onData).off('end', onEnd).off('error', reject);
    body.on('data', onData).on('end', onEnd).on('error', reject);
  });
}

function forward(method: string, url: string, incoming: IncomingHttpHeaders, body: Buffer | null, res: ServerResponse): void {
  const started = performance.now();
  const id = gateway ? randomUUID() : '';
  const hop = { address: res.socket?.remoteAddress, host: incoming.host };
  if (gateway) res.on('finish', () => record(gateway, id, method, url, res.statusCode, started));
  agent
    .request({
      origin: upstream,
      path: url,
      method,
      headers: gateway ? gateway.requestHeadersForUpstream(incoming, id, {}, hop) : endToEnd(incoming),
      body,
    })
    .then(async (answer) => {
      if (gateway) gateway.metrics.upstreamTtfb.observe(url, (performance.now() - started) / 1000, 'default');
      const first = await firstChunk(answer.body);
      const length = Number(answer.headers['content-length']);
      const headers = gateway ? (gateway.responseHeadersForClient(answer.headers, id) as Record<string, string>) : endToEnd(answer.headers);
      if (first === null || first.length === length) {
        if (first) headers['content-length'] = String(length);
        res.writeHead(answer.statusCode, headers).end(first ?? undefined);
        answer.body.on('error', () => {}).resume();
        return;
      }
      if (!Number.isNaN(length)) headers['content-length'] = String(length);
      res.writeHead(answer.statusCode, headers).write(first);
      answer.body.on('error', () => res.destroy()).pipe(res);
      res.on('close', () => answer.body.destroy());
    })
    .catch(() => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
}

function record(
  parts: NonNullable<typeof gateway>,
  requestId: string,
  method: string,
  path: string,
  status: number,
  started: number,
): void {
  const durationMs = performance.now() - started;
  parts.metrics.requests.inc(path, method, status, 'default');
  parts.metrics.duration.observe(path, durationMs / 1000);
  parts.log.info(
    { requestId, method, path, status, durationMs: Math.round(durationMs * 10) / 10, upstreamStatus: status, upstream: 'default' },
    'request completed',
  );
}

function collect(req: Readable, done: (body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => done(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
}

if (fastify) {
  const app = Fastify({ logger: false, keepAliveTimeout: 30_000 });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, payload, done) => collect(payload, (body) => done(null, body)));
  app.post('/v1/chat/completions', (request, reply) => {
    reply.hijack();
    forward(request.method, request.url, request.headers, request.body as Buffer, reply.raw);
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  announce(app.server);
} else {
  const server = createServer((req, res) => {
    if (req.method === 'GET' || req.method === 'HEAD') forward(req.method, req.url ?? '/', req.headers, null, res);
    else collect(req, (body) => forward(req.method!, req.url ?? '/', req.headers, body, res));
  });
  server.keepAliveTimeout = 30_000;
  await listenLoopback(server);
  announce(server);
}
