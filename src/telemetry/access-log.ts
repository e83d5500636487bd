import pino, { type DestinationStream } from 'pino';
import { SERVICE } from './logging.js';

/** The access log: `info` for requests, `debug` for probes and scrapes. */
export interface AccessLog {
  info(fields: object, msg: string): void;
  debug(fields: object, msg: string): void;
}

/**
 * Every field is a figure the gateway computes, never a header or a body: no redaction or pino serialisers, one JSON.stringify in
 * pino's shape.
 */
export function accessLogger(level: string, stream: DestinationStream): AccessLog {
  const threshold = pino.levels.values[level] ?? Number.POSITIVE_INFINITY;
  const time = isoTimeCache();
  const write = (value: number, fields: object, msg: string) => {
    if (value < threshold) return;
    const body = JSON.stringify(fields);
    const inner = body.length > 2 ? `${body.slice(1, -1)},` : '';
    stream.write(`{"level":${value},"time":"${time()}","service":${SERVICE_JSON},${inner}"msg":${JSON.stringify(msg)}}\n`);
  };
  return {
    info: (fields, msg) => write(pino.levels.values.info, fields, msg),
    debug: (fields, msg) => write(pino.levels.values.debug, fields, msg),
  };
}

const SERVICE_JSON = JSON.stringify(SERVICE);

/** The time as pino's isoTime writes it, made once per millisecond: a busy gateway logs many lines in one. */
function isoTimeCache(): () => string {
  let ms = 0;
  let iso = '';
  return () => {
    const now = Date.now();
    if (now !== ms) {
      ms = now;
      iso = new Date(now).toISOString();
    }
    return iso;
  };
}
