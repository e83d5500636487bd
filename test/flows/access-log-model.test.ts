import { Writable } from 'node:stream';
import { expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { buildServer } from '../../src/server.js';

// The per-request line carries the model a route noted (request.notes.model), so an operator can
// tell which model a slow or failing request was for.

it('the access log line has the model the route noted, and none when no route noted one', async () => {
  let text = '';
  const logStream = new Writable({
    write(chunk, _enc, done) {
      text += chunk;
      done();
    },
  });
  const app = buildServer(validateConfig({ upstream: { url: 'http://127.0.0.1:9/v1' } }), { logStream });
  app.post('/test/noted-model', async (request) => {
    request.notes!.model = (request.body as { model: string }).model;
    return { ok: true };
  });
  await app.inject({ method: 'POST', url: '/test/noted-model', payload: { model: 'gpt-test-1' } });
  await app.inject({ method: 'GET', url: '/nowhere' });
  await app.close();
  const lines = text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((l) => l.msg === 'request completed');
  expect(lines).toHaveLength(2);
  expect(lines[0]).toMatchObject({ path: '/test/noted-model', status: 200, model: 'gpt-test-1' });
  expect(lines[1]).toMatchObject({ path: '/nowhere', status: 404 });
  expect(lines[1]).not.toHaveProperty('model');
});
