import { createRequire } from 'node:module';
import pino, { type DestinationStream, type LoggerOptions } from 'pino';

/**
 * Paths pino blanks out wherever they appear in a log object. Credentials never reach a log line,
 * even when a whole request or error object is logged.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["api-key"]',
  'req.headers["x-api-key"]',
  'req.headers["proxy-authorization"]',
  'headers.authorization',
  'headers["api-key"]',
  'headers["x-api-key"]',
  'authorization',
  'apiKey',
  '*.apiKey',
  '*.*.apiKey',
  'keys',
  '*.keys',
];

const BASE = { service: 'compaction-gateway' };

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    // Serialise only what an operator needs; fastify's default req serialiser logs no headers.
    base: BASE,
  };
}

/**
 * stdout, through the same asynchronous destination pino makes when given none; or, for
 * `log.format: pretty`, through pino-pretty, which is loaded only then. (Batching lines saved
 * about 17 µs per small request, but a batch held at shutdown made the exit depend on a stdout
 * that may be broken: the shutdown tests fail with it.)
 */
export function stdoutDestination(format: 'json' | 'pretty' = 'json'): DestinationStream {
  nonBlockingStdout();
  if (format === 'json') return pino.destination(1);
  const pretty = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  return pretty({ destination: 1, colorize: process.stdout.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'hostname,service' });
}

/**
 * Puts fd 1 in non-blocking mode when it is a pipe or a socket. A process started with its stdout
 * piped gets a blocking fd, and pino's destination writes it from libuv's thread pool: once the
 * reader stops reading and the pipe is full, that thread sits in write(2) for good, and
 * `process.exit()` waits for it (Node joins the pool's threads on exit), so the process never
 * ends. Non-blocking, the write fails with EAGAIN instead, the destination retries it on a timer,
 * and the exit can drop it. Node's own stdout stream (opened here, never written to) is what
 * switches the mode: libuv sets O_NONBLOCK when it opens a pipe; files and TTYs are left as they are.
 */
function nonBlockingStdout(): void {
  void process.stdout;
}

/** The access log: `info` for requests, `debug` for probes and scrapes. */
export interface AccessLog {
  info(fields: object, msg: string): void;
  debug(fields: object, msg: string): void;
}

/**
 * The access log: the one line per request, on the same stream and in pino's shape (level, time,
 * service, the fields, msg). Every field in it is a figure the gateway computes (method, path
 * without the query, status, timings, the compaction summary), never a header or a body, so it
 * needs neither redaction nor pino's field-by-field serialisation: one JSON.stringify of the
 * fields costs a fraction of the 9 µs per request pino's took in the benchmark's profile.
 */
export function accessLogger(level: string, stream: DestinationStream): AccessLog {
  const threshold = pino.levels.values[level] ?? Number.POSITIVE_INFINITY;
  const write = (value: number, fields: object, msg: string) => {
    if (value < threshold) return;
    const body = JSON.stringify(fields);
    const inner = body.length > 2 ? `${body.slice(1, -1)},` : '';
    stream.write(`{"level":${value},"time":${Date.now()},"service":${SERVICE},${inner}"msg":${JSON.stringify(msg)}}\n`);
  };
  return {
    info: (fields, msg) => write(pino.levels.values.info, fields, msg),
    debug: (fields, msg) => write(pino.levels.values.debug, fields, msg),
  };
}

const SERVICE = JSON.stringify(BASE.service);
