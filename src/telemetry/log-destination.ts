import { createRequire } from 'node:module';
import pino, { type DestinationStream } from 'pino';

/** `log.format`: `auto` is pretty lines at a terminal, JSON lines anywhere else (a pipe, a file, a container's log). */
export type LogFormat = 'auto' | 'json' | 'pretty';

export function chosenLogFormat(format: LogFormat, isTTY: boolean): 'json' | 'pretty' {
  if (format === 'auto') return isTTY ? 'pretty' : 'json';
  return format;
}

/**
 * stdout, through pino's asynchronous destination (written from libuv's thread pool), or through
 * pino-pretty, loaded only when the format is pretty. JSON lines go out in batches of 4 KB, or
 * whatever came in 200 ms; the shutdown (`flushLogs`) and any other exit write what a batch holds.
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
 * Log lines gathered into one string per batch before SonicBoom sees them, as an array joined once
 * (SonicBoom would measure its growing string on every write). Access lines and pino's both come
 * through here, so their order is kept.
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
      // SonicBoom holds up to its minLength until asked.
      sonic.flush?.();
    } catch {
      // The next batch tries again; a log line is never worth the process.
    }
  }, LOG_BATCH_MS).unref();
  // An exit that skips the shutdown's flushLogs (a crash, a failed start): pino's own exit handler
  // writes what SonicBoom holds; the lines still gathered here are written after it.
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
 * Puts fd 1 in non-blocking mode when it is a pipe or a socket. A piped stdout is a blocking fd:
 * once its reader stops and the pipe is full, a thread-pool write sits in write(2) for good, and
 * `process.exit()` waits for it (Node joins the pool's threads on exit). Non-blocking, the write
 * fails with EAGAIN and is retried on a timer, which the exit drops. Opening Node's own stdout
 * stream is what switches the mode: libuv sets O_NONBLOCK when it opens a pipe.
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
