import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { lazyChildLogger } from '../../src/telemetry/lazy-child-logger.js';

// request.log is built on first use: the same lines as a pino child, and no child at all for a
// request that logs nothing (or only below the level).

function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  const parent = pino({ level: 'info', base: undefined, timestamp: false, redact: ['apiKey'] }, stream);
  let children = 0;
  type Child = (this: unknown, bindings: pino.Bindings, options?: pino.ChildLoggerOptions) => pino.Logger;
  const child = parent.child as unknown as Child;
  // pino's children inherit from their parent: counted on every level, each on its own `this`.
  const counted: Child = function (this: unknown, bindings, options) {
    children++;
    return child.call(this, bindings, options);
  };
  parent.child = counted as unknown as typeof parent.child;
  return { parent, lines, children: () => children };
}

describe('lazyChildLogger', () => {
  it('writes what a pino child writes, bindings and redaction included, building the child once', async () => {
    const { parent, lines, children } = capture();
    const log = lazyChildLogger(parent, { requestId: 'r-1' }, {});
    expect(children()).toBe(0);
    log.warn({ apiKey: 'sk-secret', n: 1 }, 'first');
    log.error('second');
    await new Promise((r) => setImmediate(r));
    expect(lines).toEqual([
      { level: 40, requestId: 'r-1', apiKey: '[Redacted]', n: 1, msg: 'first' },
      { level: 50, requestId: 'r-1', msg: 'second' },
    ]);
    expect(children()).toBe(1);
  });

  it('drops a call below its level without building a child (a route at `error`)', () => {
    const { parent, lines, children } = capture();
    const log = lazyChildLogger(parent, { requestId: 'r-2' }, { level: 'error' });
    log.info('fetching from remote server');
    log.warn('response errored');
    log.debug('nothing');
    expect(log.level).toBe('error');
    expect(children()).toBe(0);
    expect(lines).toEqual([]);
    log.fatal('down');
    expect(children()).toBe(1);
  });

  it('inherits the parent level, and follows a level set on it', () => {
    const { parent, lines, children } = capture();
    const log = lazyChildLogger(parent, { requestId: 'r-3' }, {});
    expect(log.level).toBe('info');
    log.debug('hidden');
    expect(children()).toBe(0);
    log.level = 'debug';
    log.debug('shown');
    expect(lines).toEqual([{ level: 20, requestId: 'r-3', msg: 'shown' }]);
    const grandchild = log.child({ step: 'replay' });
    grandchild.info('nested');
    expect(lines.at(-1)).toEqual({ level: 30, requestId: 'r-3', step: 'replay', msg: 'nested' });
  });
});
