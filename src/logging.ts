import { createRequire } from 'node:module';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';

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
 * `log.format: pretty`, through pino-pretty, which is loaded only then.
 */
export function stdoutDestination(format: 'json' | 'pretty' = 'json'): DestinationStream {
  if (format === 'json') return pino.destination(1);
  const pretty = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  return pretty({ destination: 1, colorize: process.stdout.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'hostname,service' });
}

/**
 * The access log: the one line per request, on the same stream. Every field in it is a figure
 * the gateway computes (method, path without the query, status, timings, the compaction
 * summary), never a header or a body, so it skips redaction, which was half of that line's cost.
 */
export function accessLogger(level: string, stream: DestinationStream): Logger {
  return pino({ level, base: BASE }, stream);
}
