import { createServer, type IncomingHttpHeaders } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { completion, json } from '../helpers/fake-upstream.js';

/** What the stand-in below saw of one request: whether its body came whole or its client left first. */
interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  bytes: number;
  outcome: 'pending' | 'whole' | 'aborted';
}

export interface TolerantUpstream {
  baseUrl: string;
  seen: Seen[];
  close(): Promise<void>;
}

/**
 * An upstream that answers every whole request with a completion and records the ones whose
 * client (the gateway) left mid-body, instead of failing on them (the shared stand-in reads bodies
 * with `for await`, which rejects when its client leaves).
 */
export async function abortTolerantUpstream(): Promise<TolerantUpstream> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const entry: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, bytes: 0, outcome: 'pending' };
    seen.push(entry);
    req.on('data', (chunk: Buffer) => (entry.bytes += chunk.length));
    req.on('error', () => (entry.outcome = 'aborted'));
    req.on('end', () => {
      entry.outcome = 'whole';
      json(res, 200, completion('ok'));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface SlowClient {
  socket: Socket;
  /** Everything the gateway sent back, as latin1 text. */
  received(): string;
  /** Resolves true when the gateway has closed the connection, or false after `withinMs`. */
  closedWithin(withinMs: number): Promise<boolean>;
}

/**
 * Connects, sends `head` at once, then one byte of `trickle` every `everyMs` while the connection
 * is open: at most `trickle.length` bytes, so the loop ends by itself. `opened` collects it, for
 * the test to destroy afterwards.
 */
export function slowClient(
  origin: string,
  head: string | Buffer,
  opened: SlowClient[],
  trickle = '{"model":"m","messages":[' + ' '.repeat(200),
  everyMs = 100,
): Promise<SlowClient> {
  const { port, hostname } = new URL(origin);
  return new Promise((resolve, reject) => {
    let text = '';
    let closed = false;
    const waiting: Array<() => void> = [];
    const socket = connect(Number(port), hostname, () => {
      socket.write(head);
      // The trickle starts after the head, never before it.
      let sent = 0;
      const timer = setInterval(() => {
        if (closed || socket.destroyed || sent >= trickle.length) return clearInterval(timer);
        socket.write(trickle[sent++]);
      }, everyMs);
      const client: SlowClient = {
        socket,
        received: () => text,
        closedWithin: (withinMs) =>
          closed
            ? Promise.resolve(true)
            : new Promise((done) => {
                const deadline = setTimeout(() => done(false), withinMs);
                waiting.push(() => {
                  clearTimeout(deadline);
                  done(true);
                });
              }),
      };
      opened.push(client);
      resolve(client);
    });
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (text += d));
    socket.once('error', reject);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      for (const wake of waiting.splice(0)) wake();
    });
  });
}
