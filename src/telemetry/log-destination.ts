import { createRequire } from 'node:module';
import pino, { type DestinationStream } from 'pino';

/** `log.format`: `auto` is pretty lines at a terminal, JSON lines anywhere else (a pipe, a file, a container's log). */
export type LogFormat = 'auto' | 'json' | 'pretty';

export function chosenLogFormat(format: LogFormat, isTTY: boolean): 'json' | 'pretty' {
  if (format === 'auto') return isTTY ? 'pretty' : 'json';
  return format;
}

/** pino's async destination (libuv's pool) or pino-pretty, loaded only when pretty. JSON lines go in 4 KB batches or every 200 ms. */
export function stdoutDestination(format: LogFormat = 'json', isTTY = process.stdout.isTTY === true): DestinationStream {
  nonBlockingStdout();
  // SonicBoom keeps its own minimum too: with none, its flush() would report done at once.
  if (chosenLogFormat(format, isTTY) === 'json') return batched(pino.destination({ dest: 1, minLength: LOG_BATCH_CHARS }));
  const pretty = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  return pretty({ destination: 1, colorize: isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'hostname,service' });
}

const LOG_BATCH_CHARS = 4096;
const LOG_BATCH_MS = 200;

interface Sonic extends DestinationStream {
  destroyed?: boolean;
  flush?: (cb?: (err?: Error) => void) => void;
  flushSync?: () => void;
  destroy?: () => void;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

/** Joined once per batch (SonicBoom re-measures a growing string on every write); access and pino lines share it, so order is kept. */
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

/** Not SonicBoom's `periodicFlush`: a write that throws on a broken stdout would escape its timer and end the process. */
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
 * A piped stdout is a blocking fd: once its reader stops, a pool write sits in write(2) for good and `process.exit()` waits for it.
 * Non-blocking, it fails with EAGAIN and retries on a timer the exit drops. Opening Node's stdout stream makes libuv set O_NONBLOCK.
 */
function nonBlockingStdout(): void {
  void process.stdout;
}

/**
 * `done(false)` after `withinMs` (a pipe nobody reads), dropping the destination: pino's sync flush at exit retries a full pipe
 * forever.
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
