import { createRequire } from 'node:module';
import type { FastifyBaseLogger } from 'fastify';
import pino, { type Bindings, type ChildLoggerOptions, type DestinationStream, type LoggerOptions } from 'pino';

/**
 * Paths pino blanks out wherever they appear in a log object. Credentials never reach a log line,
 * even when a whole request or error object is logged.
 */
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

const BASE = { service: 'compaction-gateway' };

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    // Serialise only what an operator needs; fastify's default req serialiser logs no headers.
    base: BASE,
    // `"time":"2026-12-02T04:30:00.000Z"`: read as it is, and parsed as a date by log shippers.
    timestamp: pino.stdTimeFunctions.isoTime,
  };
}

/** `log.format`: `auto` is pretty lines at a terminal, JSON lines anywhere else (a pipe, a file, a container's log). */
export type LogFormat = 'auto' | 'json' | 'pretty';

/** What `log.format` comes to for a stdout that is (or is not) a terminal. */
export function chosenLogFormat(format: LogFormat, isTTY: boolean): 'json' | 'pretty' {
  if (format === 'auto') return isTTY ? 'pretty' : 'json';
  return format;
}

/**
 * stdout, through pino's asynchronous destination, which writes from libuv's thread pool; or,
 * for `log.format: pretty` (or `auto` at a terminal), through pino-pretty, which is loaded only then. JSON lines are
 * gathered into batches of 4 KB, or whatever came in 200 ms when fewer come, not a thread-pool
 * write per line (bench/findings.md). The shutdown writes what a batch holds (see `flushLogs`),
 * and so does any other exit.
 */
export function stdoutDestination(format: LogFormat = 'json', isTTY = process.stdout.isTTY === true): DestinationStream {
  nonBlockingStdout();
  // SonicBoom keeps its own minimum too: with none, its flush() would report done at once.
  if (chosenLogFormat(format, isTTY) === 'json') return batched(pino.destination({ dest: 1, minLength: LOG_BATCH_CHARS }));
  const pretty = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  return pretty({ destination: 1, colorize: isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'hostname,service' });
}

const LOG_BATCH_CHARS = 4096;
const LOG_BATCH_MS = 200;

/** The parts of pino's SonicBoom destination the gateway uses. */
interface Sonic extends DestinationStream {
  destroyed?: boolean;
  flush?: (cb?: (err?: Error) => void) => void;
  flushSync?: () => void;
  destroy?: () => void;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

/**
 * Log lines gathered into one string per batch before SonicBoom sees them. SonicBoom appends each
 * write to the string it is gathering and measures that string's UTF-8 length on every write, so a
 * batch it gathers itself costs it a flattening of a growing string per line (counted in
 * bench/findings.md); here a batch is an array, joined once. Every line goes through here, access lines and pino's alike, so their order is kept.
 */
class LineBatcher implements DestinationStream {
  #parts: string[] = [];
  #chars = 0;

  constructor(readonly target: Sonic) {}

  write(line: string): void {
    this.#parts.push(line);
    this.#chars += line.length;
    if (this.#chars >= LOG_BATCH_CHARS) this.push();
  }

  /** Hands the gathered lines to SonicBoom, which writes them at once unless a write is under way. */
  push(): void {
    if (this.#chars === 0) return;
    // After the exit dropped the destination, lines go nowhere (SonicBoom would throw).
    if (this.target.destroyed) return this.drop();
    const batch = this.#parts.length === 1 ? this.#parts[0] : this.#parts.join('');
    this.#parts = [];
    this.#chars = 0;
    this.target.write(batch);
  }

  drop(): void {
    this.#parts = [];
    this.#chars = 0;
  }

  on(event: string, listener: (...args: unknown[]) => void): this {
    this.target.on(event, listener);
    return this;
  }
}

/**
 * Hands over a batch that has waited LOG_BATCH_MS. (SonicBoom's own `periodicFlush` would let a
 * write that throws, on a broken stdout, escape from its timer and end the process.)
 */
function batched(sonic: Sonic): DestinationStream {
  const batcher = new LineBatcher(sonic);
  setInterval(() => {
    if (sonic.destroyed) return;
    try {
      batcher.push();
      // SonicBoom holds up to its minLength until asked: asked every batch (with nothing held, a
      // write of nothing; while a write is under way, it writes the rest after it).
      sonic.flush?.();
    } catch {
      // The next batch tries again; a log line is never worth the process.
    }
  }, LOG_BATCH_MS).unref();
  // An exit that does not go through the shutdown's flushLogs (a crash, a failed start): pino's own
  // exit handler writes what SonicBoom holds; the lines still gathered here are written after it.
  process.on('exit', () => {
    if (sonic.destroyed) return;
    try {
      batcher.push();
      sonic.flushSync?.();
    } catch {
      // Exiting: there is nowhere left to report this.
    }
  });
  return batcher;
}

/**
 * Puts fd 1 in non-blocking mode when it is a pipe or a socket. A process started with its stdout
 * piped gets a blocking fd; pino-pretty's destination writes it from libuv's thread pool, and once
 * the reader stops reading and the pipe is full, that thread sits in write(2) for good, and
 * `process.exit()` waits for it (Node joins the pool's threads on exit): the process never ends.
 * Non-blocking, the write fails with EAGAIN instead and is retried on a timer, which the exit
 * drops. Opening Node's own stdout stream is what switches the mode: libuv sets O_NONBLOCK when
 * it opens a pipe; files and terminals are left as they are.
 */
function nonBlockingStdout(): void {
  void process.stdout;
}

/**
 * Writes what the log destination holds, then calls `done(true)`; or `done(false)` after
 * `withinMs` without it (a pipe nobody reads), having dropped the destination so that pino's
 * synchronous flush at exit, which retries a full pipe forever, has nothing left to do.
 */
export function flushLogs(stream: DestinationStream, withinMs: number, done: (flushed: boolean) => void): void {
  const sonic = sonicOf(stream);
  if (stream instanceof LineBatcher && !sonic.destroyed) {
    try {
      stream.push();
    } catch {
      dropLogs(stream);
      return done(false);
    }
  }
  // Whether SonicBoom holds anything is not on its public surface: it is asked to flush, and says when it is done.
  if (sonic.destroyed || typeof sonic.flush !== 'function') return done(true);
  let settled = false;
  const settle = (flushed: boolean) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    if (!flushed) dropLogs(stream);
    done(flushed);
  };
  const timer = setTimeout(() => settle(false), withinMs);
  try {
    sonic.flush((err) => settle(!err));
  } catch {
    settle(false);
  }
}

/** Hands what the batch holds to stdout now, not at the batch's timer: the ready line, when the port already answers. */
export function writeLogsNow(stream: DestinationStream): void {
  if (!(stream instanceof LineBatcher)) return;
  const sonic = sonicOf(stream);
  if (sonic.destroyed) return;
  try {
    stream.push();
    sonic.flush?.();
  } catch {
    // The batch's timer tries again; a log line is never worth the process.
  }
}

/** Drops whatever the destination still holds; later writes go nowhere. */
export function dropLogs(stream: DestinationStream): void {
  if (stream instanceof LineBatcher) stream.drop();
  try {
    sonicOf(stream).destroy?.();
  } catch {
    // Shutting down: there is nowhere left to report this.
  }
}

function sonicOf(stream: DestinationStream): Sonic {
  return stream instanceof LineBatcher ? stream.target : (stream as Sonic);
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
 * fields costs a fraction of pino's (bench/findings.md).
 */
export function accessLogger(level: string, stream: DestinationStream): AccessLog {
  const threshold = pino.levels.values[level] ?? Number.POSITIVE_INFINITY;
  const time = isoTimeCache();
  const write = (value: number, fields: object, msg: string) => {
    if (value < threshold) return;
    const body = JSON.stringify(fields);
    const inner = body.length > 2 ? `${body.slice(1, -1)},` : '';
    stream.write(`{"level":${value},"time":"${time()}","service":${SERVICE},${inner}"msg":${JSON.stringify(msg)}}\n`);
  };
  return {
    info: (fields, msg) => write(pino.levels.values.info, fields, msg),
    debug: (fields, msg) => write(pino.levels.values.debug, fields, msg),
  };
}

const SERVICE = JSON.stringify(BASE.service);

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

type LogMethod = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * fastify's per-request logger (`request.log`), built on first use. fastify makes a pino child
 * for every request; the gateway's requests log through it only when something goes wrong (the
 * access line has its own writer), so most never need one (bench/findings.md). A call
 * below the logger's level is dropped without building it; the rest go to the real child, with
 * the same bindings, redaction and stream.
 */
export function lazyChildLogger(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyChildLogger(parent, bindings, options);
}

class LazyChildLogger {
  #real: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  get level(): string {
    return this.#real?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: string) {
    this.#logger().level = level;
  }

  fatal(...args: unknown[]): void {
    this.#log('fatal', args);
  }
  error(...args: unknown[]): void {
    this.#log('error', args);
  }
  warn(...args: unknown[]): void {
    this.#log('warn', args);
  }
  info(...args: unknown[]): void {
    this.#log('info', args);
  }
  debug(...args: unknown[]): void {
    this.#log('debug', args);
  }
  trace(...args: unknown[]): void {
    this.#log('trace', args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger().child(bindings, options);
  }

  #log(method: LogMethod, args: unknown[]): void {
    const threshold = pino.levels.values[this.level];
    if (threshold !== undefined && pino.levels.values[method] < threshold) return;
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- pino's overloaded LogFn takes no spread without it (tsc TS2556)
    (this.#logger()[method] as (...a: unknown[]) => void)(...args);
  }

  #logger(): FastifyBaseLogger {
    return (this.#real ??= this.parent.child(this.bindings, this.options));
  }
}
