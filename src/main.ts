#!/usr/bin/env node
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
  await app.listen({ host: config.server.host, port: config.server.port });
  app.log.info({ upstream: config.upstream.url, compaction: config.compaction.strategy }, 'gateway ready');

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
    // Kept-alive connections go as soon as they fall idle (a stream that was running ends).
    setInterval(() => app.server.closeIdleConnections(), 100).unref();
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

main().catch((err) => {
  process.stderr.write(`compaction-gateway: failed to start: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
