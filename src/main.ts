#!/usr/bin/env node
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import type { DestinationStream } from 'pino';
import { UsageError, flagList, parseArgs, usage } from './process/cli.js';
import { unknownVariableWarning, unknownVariables, type UnknownVariable } from './config/load.js';
import type { Config } from './config/schema.js';
import { dropLogs, flushLogs, stdoutDestination, writeLogsNow } from './telemetry/log-destination.js';
import { buildServer } from './server.js';
import { startTelemetry } from './telemetry/traces.js';
import { probeRedis } from './memory/redis-client.js';
import { memoryRedis } from './memory/redis-target.js';
import { redisUnreachable } from './memory/redis-wording.js';
import { checkReport, preflight } from './process/preflight.js';
import { listenFailure, listeningOrigin, startupFields, startupWarnings } from './process/startup.js';
import { gatewayVersion } from './process/version.js';

/** The process: read flags and config, build the server, listen, shut down on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  let command;
  try {
    command = parseArgs(argv).run;
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    const hint = `flags: ${flagList()} (every other setting comes from the config file or the environment; see --help)`;
    return exitWith(2, `compaction-gateway: ${err.message}\n${hint}\n`);
  }
  if (command === 'help') return exitWith(0, usage(), 'stdout');
  if (command === 'version') return exitWith(0, `compaction-gateway ${gatewayVersion()}\n`, 'stdout');

  const shipped = fileURLToPath(new URL('../config/default.yaml', import.meta.url));
  // A misspelt variable explains many a config error or refusal: said with them, and logged once serving.
  const unknownEnv = unknownVariables(process.env);
  const warnings = unknownEnv.map((u) => `warning: ${unknownVariableWarning(u)}`);
  const say = (lines: string[]) => lines.map((line) => `compaction-gateway: ${line}\n`).join('');
  const checked = preflight(argv, process.env, shipped);
  if ('problems' in checked) return exitWith(2, say([...checked.problems, ...warnings]));
  const { config, source } = checked;
  if (command === 'check') {
    const report = await checkReport(config, source, process.env, { gateway: gatewayVersion(), node: process.version });
    return exitWith(0, say([...report, ...warnings]), 'stdout');
  }
  // `auto`: readable lines for a person at a terminal, JSON lines for everything else.
  const logStream = stdoutDestination(config.log.format, process.stdout.isTTY === true);
  // A stdout that fails (closed, broken pipe) must not end the process: there is nowhere to say so.
  (logStream as { on?: (event: string, fn: () => void) => void }).on?.('error', () => {});
  const app = buildServer(config, { logStream });
  // Traces only when an OTLP endpoint is set; otherwise the SDK is never loaded. The last spans go out on close.
  const telemetry = startTelemetry(config, gatewayVersion(), app.log);
  app.addHook('onClose', async () => (await telemetry)?.shutdown());
  // Before listening: a signal that arrives while starting still drains and exits.
  exitOnSignals(app, logStream, config.server.shutdownGraceMs);
  await telemetry;
  try {
    await app.listenOn(config.server.host, config.server.port);
  } catch (err) {
    const failure = listenFailure(err as NodeJS.ErrnoException, config.server);
    if (!failure) throw err;
    return exitWith(failure.exitCode, say([failure.line, ...warnings]));
  }
  await logStartup(app, config, source, unknownEnv);
  writeLogsNow(logStream);
}

async function logStartup(
  app: FastifyInstance,
  config: Readonly<Config>,
  source: string | undefined,
  unknownEnv: UnknownVariable[],
): Promise<void> {
  const fields = startupFields(config, source, {
    gateway: gatewayVersion(),
    node: process.version,
    origin: listeningOrigin(app.server.address()),
  });
  // A Redis node, a Cluster or a Sentinel set: asked once, and said plainly when it does not answer.
  const redis = memoryRedis(config);
  const redisProblem = redis ? await probeRedis(redis) : null;
  if (redis) fields.memory += redisProblem ? ' (not reachable at start)' : ' (reachable)';
  app.log.info({ ...fields, pid: process.pid }, 'gateway ready');
  for (const warning of startupWarnings(config)) app.log.warn(warning);
  for (const unknown of unknownEnv)
    app.log.warn({ variable: unknown.name, didYouMean: unknown.meant?.name }, unknownVariableWarning(unknown));
  if (redis && redisProblem) {
    const unreachable = redisUnreachable(redis, redisProblem);
    app.log.warn({ redis: unreachable.redis }, unreachable.message);
  }
}

function exitWith(code: number, text: string, to: 'stdout' | 'stderr' = 'stderr'): void {
  process[to].write(text, () => process.exit(code));
}

/**
 * SIGTERM/SIGINT: readiness fails, no new connections, in-flight work finishes, exit 0; past `graceMs`, exit 1. The deadline is armed
 * first and every later step guarded, so nothing (a throwing log write, a connection that never closes, a stalled upstream) outlives it.
 */
function exitOnSignals(app: FastifyInstance, logStream: DestinationStream, graceMs: number): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    armDeadline(app, logStream, graceMs);
    quietly(() => app.startDraining());
    quietly(() => app.log.info({ signal, graceMs }, 'shutting down: finishing in-flight requests'));
    // Connections go as soon as they fall idle (a stream that was running ends).
    quietly(() => setInterval(() => app.closeIdleConnections(), 100).unref());
    let closed: Promise<void>;
    try {
      closed = app.close();
    } catch (err) {
      closed = Promise.reject(err);
    }
    closed.then(
      () => exitFlushed(0, logStream),
      (err) => {
        quietly(() => app.log.error({ err }, 'error while shutting down'));
        exitFlushed(1, logStream);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/** How long the last log lines may take to reach stdout before the process exits without them. */
const LOG_FLUSH_MS = 400;
/** Past the grace period: the backstop if even the deadline's own exit is held up. */
const HARD_STOP_MS = 900;

function armDeadline(app: FastifyInstance, logStream: DestinationStream, graceMs: number): void {
  setTimeout(() => {
    quietly(() => app.log.warn({ graceMs }, 'grace period over; exiting with requests still open'));
    exitFlushed(1, logStream);
  }, graceMs);
  setTimeout(() => {
    dropLogs(logStream);
    process.exit(1);
  }, graceMs + HARD_STOP_MS);
}

/** Exits once the log destination has written what it holds, or after LOG_FLUSH_MS without it. */
function exitFlushed(code: number, logStream: DestinationStream): void {
  flushLogs(logStream, LOG_FLUSH_MS, () => process.exit(code));
}

function quietly(step: () => unknown): void {
  try {
    step();
  } catch {
    // Shutting down goes on: the deadline is armed, and there is nowhere left to report this.
  }
}

main().catch((err) => {
  process.stderr.write(`compaction-gateway: failed to start: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
