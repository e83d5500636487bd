// Loopback plumbing for the by-hand agent scripts: a relay that records what a CLI sent and what
// it got back, and a trap that stands for the rest of the network.
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { decompress as zstdDecompress } from 'fzstd';

/** One request as the CLI sent it, and the answer it got. */
export interface Turn {
  n: number;
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  /** The body's Content-Encoding, '' for none. */
  encoding: string;
  /** The body's size as sent, and decoded; the decoded text. */
  wireBytes: number;
  bytes: number;
  body: string;
  status: number;
  /** The answer's x-gateway-compaction header. */
  compaction: string | undefined;
  /** The first bytes of an error answer (status >= 400). */
  error: string;
}

export interface Loopback {
  origin: string;
  close: () => Promise<void>;
}

const UNDO: Record<string, (b: Buffer) => Buffer> = {
  gzip: (b) => zlib.gunzipSync(b),
  deflate: (b) => zlib.inflateSync(b),
  br: (b) => zlib.brotliDecompressSync(b),
  zstd: (b) => Buffer.from(zstdDecompress(b)),
};

/** A body as its Content-Encoding says to read it (undecodable: as it came). */
export function decoded(body: Buffer, encoding: string): Buffer {
  try {
    return UNDO[encoding]?.(body) ?? body;
  } catch {
    return body;
  }
}

/** CLI -> relay -> `target`: bytes untouched both ways; each request and its answer recorded in `turns`. */
export async function startRelay(target: string, turns: Turn[]): Promise<Loopback> {
  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const encoding = String(req.headers['content-encoding'] ?? '')
      .trim()
      .toLowerCase();
    const plain = decoded(body, encoding);
    const turn: Turn = {
      n: turns.length + 1,
      method: req.method ?? '',
      path: (req.url ?? '').split('?')[0],
      headers: req.headers,
      encoding,
      wireBytes: body.length,
      bytes: plain.length,
      body: plain.toString('utf8'),
      status: 0,
      compaction: undefined,
      error: '',
    };
    turns.push(turn);
    const url = new URL(req.url ?? '/', target);
    const up = httpRequest(url, { method: req.method, headers: { ...req.headers, host: url.host } }, (answer) => {
      turn.status = answer.statusCode ?? 0;
      const h = answer.headers['x-gateway-compaction'];
      turn.compaction = Array.isArray(h) ? h.join(', ') : h;
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      if (turn.status >= 400)
        answer.on(
          'data',
          (c: Buffer) => (turn.error = (turn.error + decoded(c, String(answer.headers['content-encoding'] ?? ''))).slice(0, 600)),
        );
      answer.pipe(res);
    });
    up.on('error', (err) => {
      turn.status = 502;
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`relay: ${err.message}`);
    });
    up.end(body);
  });
  return { origin: await listen(server), close: () => close(server) };
}

/**
 * The rest of the network: as HTTP(S)_PROXY it refuses whatever a CLI tries to reach beyond
 * loopback (`egress`); as a base URL (a CLI's account backend) it answers 404 to every path
 * (`backend`). Either way nothing leaves the machine.
 */
export async function startTrap(): Promise<Loopback & { egress: string[]; backend: string[] }> {
  const egress: string[] = [];
  const backend: string[] = [];
  const server = createServer((req, res) => {
    void readBody(req).then(() => {
      const proxied = /^[a-z]+:\/\//i.test(req.url ?? '');
      (proxied ? egress : backend).push(`${req.method} ${(req.url ?? '').split('?')[0]}`);
      const text = JSON.stringify({ error: { message: proxied ? 'no traffic outside loopback' : 'not here', type: 'not_found' } });
      res.writeHead(proxied ? 403 : 404, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  server.on('connect', (req, socket) => {
    egress.push(`CONNECT ${req.url}`);
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
  });
  return { origin: await listen(server), egress, backend, close: () => close(server) };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function close(server: Server): Promise<void> {
  return new Promise((r) => {
    server.closeAllConnections();
    server.close(() => r());
  });
}
