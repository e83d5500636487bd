import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/*
 * A small forward proxy on loopback, the kind a company puts between its machines and the
 * internet: CONNECT tunnels for https:// (the TLS runs end to end inside, the proxy sees only
 * host:port), absolute-form requests for plain http://. It records what a proxy's log would show,
 * and can demand Basic credentials (407 without them). It only ever connects to loopback
 * addresses, so a test that points it anywhere else fails instead of reaching the internet.
 */

/** One request as the proxy saw it. */
interface ProxySeen {
  /** CONNECT, or the plain request's method. */
  method: string;
  /** host:port the client asked for. */
  target: string;
  /** Whether a Proxy-Authorization header came. */
  authorized: boolean;
  /** The Basic user it named (never the password). */
  user?: string;
  /** What the proxy answered: 200 for an established tunnel, 407, 403, 502, or the upstream's status. */
  status: number;
  /** For a tunnel: the local port of the proxy's socket to the target, which the target sees as its peer's port. */
  outboundPort?: number;
}

export interface ForwardProxyOptions {
  /** Demand these Basic credentials; without them every request gets 407. */
  credentials?: { user: string; password: string };
}

export interface ForwardProxy {
  /** http://127.0.0.1:PORT */
  origin: string;
  port: number;
  /** The proxy's URL, with credentials when given (for a config's `proxy` or HTTPS_PROXY). */
  url(user?: string, password?: string): string;
  seen: ProxySeen[];
  /** The CONNECT requests alone. */
  connects(): ProxySeen[];
  /** Local ports of the proxy's sockets to targets: a target's peer port in this set came through the proxy. */
  outboundPorts(): Set<number>;
  close(): Promise<void>;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

export async function startForwardProxy(options: ForwardProxyOptions = {}): Promise<ForwardProxy> {
  const seen: ProxySeen[] = [];
  // Client sockets and tunnels' target sockets alike: close() destroys every one.
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };

  const server = createServer((req, res) => plain(req, res));
  server.on('connection', track);
  server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) => tunnel(req, client as Socket, head));
  // A malformed request from a client is answered by node:http itself; nothing to record.
  server.on('clientError', (_err, socket) => socket.destroy());

  /** Records the request and checks its credentials and target: `refuse` is the status to answer with, if any. */
  function admit(req: IncomingMessage, method: string, target: string): { entry: ProxySeen; refuse?: 407 | 403 } {
    const header = req.headers['proxy-authorization'];
    const entry: ProxySeen = { method, target, authorized: header !== undefined, status: 0 };
    const decoded = basic(header);
    if (decoded) entry.user = decoded.user;
    seen.push(entry);
    const wanted = options.credentials;
    if (wanted && (decoded?.user !== wanted.user || decoded?.password !== wanted.password)) return { entry, refuse: 407 };
    if (!LOOPBACK.has(hostOf(target))) return { entry, refuse: 403 };
    return { entry };
  }

  function tunnel(req: IncomingMessage, client: Socket, head: Buffer): void {
    const target = req.url ?? '';
    const { entry, refuse } = admit(req, 'CONNECT', target);
    client.on('error', () => client.destroy());
    if (refuse) {
      entry.status = refuse;
      client.end(refusal(refuse));
      return;
    }
    const port = Number(/:(\d+)$/.exec(target)?.[1]);
    const upstream = connect(port, hostOf(target));
    track(upstream);
    upstream.once('connect', () => {
      entry.status = 200;
      entry.outboundPort = upstream.localPort;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.once('error', () => {
      if (entry.status === 0) {
        entry.status = 502;
        client.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      } else client.destroy();
    });
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  }

  function plain(req: IncomingMessage, res: ServerResponse): void {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      // An origin-form request: this is a proxy, not a server.
      res.writeHead(400, { 'content-type': 'text/plain', connection: 'close' }).end('absolute-form request expected\n');
      return;
    }
    const { entry, refuse } = admit(req, req.method ?? '', url.host);
    if (refuse) {
      entry.status = refuse;
      res
        .writeHead(refuse, {
          ...(refuse === 407 ? { 'proxy-authenticate': 'Basic realm="egress-test"' } : {}),
          'content-length': 0,
          connection: 'close',
        })
        .end();
      return;
    }
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const out = httpRequest(
      { host: hostOf(url.host), port: Number(url.port) || 80, method: req.method, path: url.pathname + url.search, headers },
      (answer) => {
        entry.status = answer.statusCode ?? 0;
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('socket', (socket) => {
      track(socket);
      socket.once('connect', () => (entry.outboundPort = socket.localPort));
    });
    out.once('error', () => {
      entry.status = 502;
      if (!res.headersSent) res.writeHead(502, { 'content-length': 0, connection: 'close' }).end();
      else res.destroy();
    });
    req.pipe(out);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    port,
    url: (user, password) =>
      user === undefined ? origin : `http://${encodeURIComponent(user)}:${encodeURIComponent(password ?? '')}@127.0.0.1:${port}`,
    seen,
    connects: () => seen.filter((s) => s.method === 'CONNECT'),
    outboundPorts: () => new Set(seen.flatMap((s) => (s.outboundPort === undefined ? [] : [s.outboundPort]))),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The host of `host:port` (`[::1]:443` too), without brackets. */
function hostOf(target: string): string {
  return target
    .replace(/:\d*$/, '')
    .replace(/^\[(.*)\]$/, '$1')
    .toLowerCase();
}

/** A Basic Proxy-Authorization's user and password, or undefined for anything else. */
function basic(header: string | undefined): { user: string; password: string } | undefined {
  const match = /^Basic\s+(\S+)$/i.exec(header ?? '');
  if (!match) return undefined;
  const text = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = text.indexOf(':');
  return colon < 0 ? { user: text, password: '' } : { user: text.slice(0, colon), password: text.slice(colon + 1) };
}

function refusal(status: 407 | 403): string {
  const reason = status === 407 ? 'Proxy Authentication Required\r\nproxy-authenticate: Basic realm="egress-test"' : 'Forbidden';
  return `HTTP/1.1 ${status} ${reason}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`;
}
