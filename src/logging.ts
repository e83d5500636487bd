import type { LoggerOptions } from 'pino';

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

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    // Serialise only what an operator needs; fastify's default req serialiser logs no headers.
    base: { service: 'compaction-gateway' },
  };
}
