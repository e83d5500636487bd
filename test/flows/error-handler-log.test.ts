import { Writable } from 'node:stream';
import { expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { GatewayError } from '../../src/http/errors.js';
import { buildServer } from '../../src/server.js';

// The one error handler: an operating condition (an upstream error code) is one plain WARN with
// the status the client got; a bug (anything else) is an ERROR with its stack.

it('logs a 5xx gateway error as one WARN without a stack, and a bug as an ERROR with one', async () => {
  let text = '';
  const logStream = new Writable({
    write(chunk, _enc, done) {
      text += chunk;
      done();
    },
  });
  const app = buildServer(validateConfig({ upstream: { url: 'http://127.0.0.1:9/v1' } }), { logStream });
  const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
  app.get('/test/condition', async () => {
    throw new GatewayError('upstream_unreachable', 'The upstream could not be reached (socket hang up).', { cause: reset });
  });
  app.get('/test/bug', async () => {
    throw new TypeError('undefined is not a function');
  });
  const condition = await app.inject({ method: 'GET', url: '/test/condition' });
  const bug = await app.inject({ method: 'GET', url: '/test/bug' });
  await app.close();

  expect(condition.statusCode).toBe(502);
  expect(bug.statusCode).toBe(500);
  const lines = text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((l) => l.msg !== 'request completed');
  const forCondition = lines.filter((l) => l.requestId === condition.headers['x-request-id']);
  expect(forCondition).toEqual([
    expect.objectContaining({
      level: 40,
      status: 502,
      code: 'upstream_unreachable',
      cause: 'ECONNRESET',
      msg: 'answered 502 upstream_unreachable: The upstream could not be reached (socket hang up).',
    }),
  ]);
  expect(JSON.stringify(forCondition)).not.toMatch(/stack/);
  const forBug = lines.filter((l) => l.requestId === bug.headers['x-request-id']);
  expect(forBug).toHaveLength(1);
  expect(forBug[0]).toMatchObject({ level: 50, msg: 'request failed' });
  expect(forBug[0].err.stack).toMatch(/TypeError: undefined is not a function/);
});
