import { createServer, type IncomingHttpHeaders } from 'node:http';
import { Agent } from 'undici';
import { announce, listenLoopback } from './child.js';

/*
 * The floor: a bare reverse proxy written directly on undici, the least a Node proxy can do.
 * Request and response bodies stream straight through; hop-by-hop headers are dropped. Whatever
 * the gateway costs above this is the gateway's own cost. It pipes with .pipe() rather than
 * stream.pipeline(), whose AbortController and DOMException per call would make the floor
 * lower than it need be (the gateway avoids them too).
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
  agent
    .request({
      origin: upstream,
      path: req.url ?? '/',
      method: req.method as 'POST',
      headers: endToEnd(req.headers),
      body: hasBody ? req : null,
    })
    .then(
      (answer) => {
        res.writeHead(answer.statusCode, endToEnd(answer.headers));
        answer.body.on('error', () => res.destroy()).pipe(res);
        res.on('close', () => answer.body.destroy());
      },
      () => {
        res.writeHead(502).end();
      },
    );
});

server.keepAliveTimeout = 30_000;
await listenLoopback(server);
announce(server);
