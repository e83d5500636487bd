#!/usr/bin/env node
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig } from './config/load.js';
import { buildServer } from './server.js';

/** The process: load config, build the server, listen, shut down gracefully on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  let config;
  try {
    const shipped = fileURLToPath(new URL('../config/default.yaml', import.meta.url));
    config = loadConfig(process.argv.slice(2), process.env, shipped);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`compaction-gateway: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const app = buildServer(config);
  const closeIdle = idleConnectionCloser(app.server);
  await app.listen({ host: config.server.host, port: config.server.port });
  app.log.info({ upstream: loggableUrl(config.upstream.url), compaction: config.compaction.strategy }, 'gateway ready');

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.startDraining();
    app.log.info({ signal, graceMs: config.server.shutdownGraceMs }, 'shutting down: finishing in-flight requests');
    const timer = setTimeout(() => {
      app.log.warn('grace period over; exiting with requests still open');
      process.exit(1);
    }, config.server.shutdownGraceMs);
    timer.unref();
    // Connections go as soon as they fall idle (a stream that was running ends).
    setInterval(closeIdle, 100).unref();
    app.close().then(
      () => process.exit(0),
      (err) => {
        app.log.error({ err }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/**
 * Closes every connection without a request in progress. `server.closeIdleConnections()` alone
 * misses connections that never sent a request (a pre-connecting client or load balancer, a
 * client that gave up before sending), and one of those held shutdown for the whole grace period.
 */
function idleConnectionCloser(server: Server): () => void {
  const open = new Set<Socket>();
  const busy = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => {
      open.delete(socket);
      busy.delete(socket);
    });
  });
  server.on('request', (req, res) => {
    busy.add(req.socket);
    res.once('close', () => busy.delete(req.socket));
  });
  return () => {
    server.closeIdleConnections();
    for (const socket of open) if (!busy.has(socket)) socket.destroy();
  };
}

/** A URL without what may hold a secret: userinfo (`https://user:key@host`) and the query (`?api-key=`). */
function loggableUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

main().catch((err) => {
  process.stderr.write(`compaction-gateway: failed to start: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
