import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Config } from '../config/schema.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export interface ListenerSettings {
  timeouts: Config['server'];
  /** Wraps fastify's handler (the server span, telemetry/traces.ts), or leaves it as it is. */
  wrap: (handler: Handler) => Handler;
  /** Requests Node's parser refuses before fastify sees them. */
  clientError: (err: Error & { code?: string }, socket: Socket) => void;
}

/** `localhost` gets a second server on the other loopback family: fastify's own skips serverFactory settings, needs `::1` in /etc/hosts. */
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

  /** After fastify has bound the first, on the same port; skipped where the machine has no such address (no IPv6 in the container). */
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

  /** `closeIdleConnections()` misses connections that never sent a request (a pre-connecting LB): one held shutdown its whole grace. */
  closeIdle(): void {
    for (const server of this.servers) server.closeIdleConnections();
    for (const socket of this.open) if (!this.busy.has(socket)) socket.destroy();
  }

  private create(): Server {
    const { timeouts } = this.settings;
    const server = createServer({ connectionsCheckingInterval: checkingInterval(timeouts) }, this.handler);
    applyTimeouts(server, timeouts);
    // Node drops headers past its count (2,000) while still framing the body by a dropped Content-Length: a 401 kept the connection for a
    // slow body, and the pass-through sent a POST upstream without its length. The 16 KiB header size limit bounds them instead.
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

const LOOPBACKS: Record<string, string> = { localhost: '::1' };
const UNAVAILABLE = new Set(['EADDRNOTAVAIL', 'EAFNOSUPPORT']);

/** The host fastify binds first: `localhost` is its IPv4 loopback, whatever /etc/hosts says. */
export function primaryHost(host: string): string {
  return LOOPBACKS[host] ? '127.0.0.1' : host;
}

/** 0 turns one off; none runs while the upstream is awaited. No socket idle timeout: it would cut a first token minutes away. */
function applyTimeouts(server: Server, timeouts: Config['server']): void {
  server.requestTimeout = timeouts.requestTimeoutMs;
  server.headersTimeout = timeouts.headersTimeoutMs;
  server.keepAliveTimeout = timeouts.keepAliveTimeoutMs;
}

/** Node checks timeouts every 30 s by default, letting one overrun as long again: a quarter of the shortest, within 100 ms to 30 s. */
function checkingInterval(timeouts: Config['server']): number {
  const set = [timeouts.requestTimeoutMs, timeouts.headersTimeoutMs].filter((ms) => ms > 0);
  if (set.length === 0) return 30_000;
  return Math.min(30_000, Math.max(100, Math.floor(Math.min(...set) / 4)));
}
