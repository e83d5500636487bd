import pino, { type LoggerOptions } from 'pino';

/** Blanked wherever they appear, so credentials never reach a line even when a whole request or error object is logged. */
const REDACT_PATHS = [
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

export const SERVICE = 'compaction-gateway';

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    // fastify's default req serialiser logs no headers.
    base: { service: SERVICE },
    // Parsed as a date by log shippers, and read as it is.
    timestamp: pino.stdTimeFunctions.isoTime,
  };
}
