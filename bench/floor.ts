import { createServer, type IncomingHttpHeaders } from 'node:http';
import { Agent } from 'undici';
import { announce, listenLoopback } from './child.js';

/*
 * The floor: a bare reverse proxy written directly on undici, the least a Node proxy can do.
 * Request and response bodies stream straight through; hop-by-hop headers are dropped. Whatever
 * the gateway costs above this is the gateway's own cost. The answer is written by undici's
 * stream() straight into the response, as the independent harness's undici proxy does
 * (bench/findings.md, round 9: the two floors, one program).
 */

const { upstream } = JSON.parse(process.argv[2] ?? '{}') as { upstream: string };
const agent = new Agent({ keepAliveTimeout: 30_000, connections: null });
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host']);

function endToEnd(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  }
  return out;
}

const server = createServer((req, res) => {
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  agent.stream(
    {
      origin: upstream,
      path: req.url ?? '/',
      method: req.method as 'POST',
      headers: endToEnd(req.headers),
      body: hasBody ? req : null,
    },
    ({ statusCode, headers }) => {
      res.writeHead(statusCode, endToEnd(headers));
      return res;
    },
    (err) => {
      if (!err) return;
      if (!res.headersSent) res.writeHead(502);
      res.end();
    },
  );
});

server.keepAliveTimeout = 30_000;
await listenLoopback(server);
announce(server);
