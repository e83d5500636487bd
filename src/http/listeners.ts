import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Config } from '../config/schema.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** What every server the gateway listens on gets, whichever address it is bound to. */
export interface ListenerSettings {
  timeouts: Config['server'];
  /** Wraps fastify's handler (the server span, telemetry/traces.ts), or leaves it as it is. */
  wrap: (handler: Handler) => Handler;
  /** Requests Node's parser refuses before fastify sees them. */
  clientError: (err: Error & { code?: string }, socket: Socket) => void;
}

/**
 * The gateway's HTTP servers: one per address it listens on, all alike. fastify asks for the first
 * through `serverFactory` and knows it as `app.server`; `localhost` also gets a second, on the
 * other loopback family, made here with the same handler, timeouts, client-error answer and
 * shutdown. (fastify's own second binding for `localhost` is made without a server factory's
 * settings, and only where /etc/hosts lists `::1` as localhost, which many containers do not.)
 */
export class Listeners {
  private readonly servers: Server[] = [];
  private readonly open = new Set<Socket>();
  private readonly busy = new Set<Socket>();
  private handler: Handler | undefined;

  constructor(private readonly settings: ListenerSettings) {}

  /** fastify's `serverFactory`. fastify adds its own client-error handler to this first server. */
  readonly factory = (handler: Handler): Server => {
    this.handler = this.settings.wrap(handler);
    return this.create();
  };

  /**
   * Binds the other loopback address after fastify has bound the first: on the same port, and
   * skipped where this machine has no such address (no IPv6 in the container).
   */
  async alsoListen(host: string, port: number): Promise<void> {
    const extra = LOOPBACKS[host];
    if (!extra) return;
    const server = this.create();
    server.on('clientError', this.settings.clientError);
    const bound = await new Promise<boolean>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) => (UNAVAILABLE.has(err.code ?? '') ? resolve(false) : reject(err)));
      server.listen({ host: extra, port }, () => resolve(true));
    });
    if (!bound) this.servers.splice(this.servers.indexOf(server), 1);
  }

  /** Stops every server taking connections (fastify closes the first); resolves once each has no connection left. */
  closeOthers(): Promise<void> {
    const others = this.servers.slice(1).filter((s) => s.listening);
    return Promise.all(others.map((s) => new Promise<void>((resolve) => s.close(() => resolve())))).then(() => undefined);
  }

  /**
   * Closes every connection without a request in progress, on every server. Node's
   * `closeIdleConnections()` alone misses connections that never sent a request (a
   * pre-connecting client or load balancer), and one of those held shutdown for the whole grace period.
   */
  closeIdle(): void {
    for (const server of this.servers) server.closeIdleConnections();
    for (const socket of this.open) if (!this.busy.has(socket)) socket.destroy();
  }

  private create(): Server {
    const { timeouts } = this.settings;
    const server = createServer({ connectionsCheckingInterval: checkingInterval(timeouts) }, this.handler);
    applyTimeouts(server, timeouts);
    // Node drops the headers past its count (2,000) while its parser still frames the body by a
    // dropped Content-Length: a 401 then kept the connection for the rest of a slow body, and the
    // pass-through sent a POST upstream without its length. The header size limit (16 KiB)
    // bounds them instead.
    server.maxHeadersCount = 0;
    server.on('connection', (socket: Socket) => {
      this.open.add(socket);
      socket.once('close', () => {
        this.open.delete(socket);
        this.busy.delete(socket);
      });
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      this.busy.add(req.socket);
      res.once('close', () => this.busy.delete(req.socket));
    });
    this.servers.push(server);
    return server;
  }
}

/** The loopback address of the other family, for a host that names both. */
const LOOPBACKS: Record<string, string> = { localhost: '::1' };
const UNAVAILABLE = new Set(['EADDRNOTAVAIL', 'EAFNOSUPPORT']);

/** The host fastify binds first: `localhost` is its IPv4 loopback, whatever /etc/hosts says. */
export function primaryHost(host: string): string {
  return LOOPBACKS[host] ? '127.0.0.1' : host;
}

/**
 * How long a client may take to send a whole request (from its first byte to its last) and its
 * headers, and how long an idle keep-alive connection stays open; 0 turns one off. None of them
 * runs while the gateway waits for the upstream: the request is whole by then. An idle timeout on
 * the socket (fastify's `connectionTimeout`) would cut a request whose first token is minutes
 * away; it stays unset.
 */
function applyTimeouts(server: Server, timeouts: Config['server']): void {
  server.requestTimeout = timeouts.requestTimeoutMs;
  server.headersTimeout = timeouts.headersTimeoutMs;
  server.keepAliveTimeout = timeouts.keepAliveTimeoutMs;
}

/**
 * Node looks for requests past their timeouts on an interval, 30 s by default, which would let a
 * timeout run on for as long again: a quarter of the shortest one set, within 100 ms and 30 s.
 */
function checkingInterval(timeouts: Config['server']): number {
  const set = [timeouts.requestTimeoutMs, timeouts.headersTimeoutMs].filter((ms) => ms > 0);
  if (set.length === 0) return 30_000;
  return Math.min(30_000, Math.max(100, Math.floor(Math.min(...set) / 4)));
}
