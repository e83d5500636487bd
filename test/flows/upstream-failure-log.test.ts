import { afterEach, describe, expect, it } from 'vitest';
import { failureLog, fromUpstreamFailure } from '../../src/http/errors.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/ports.js';
import { jsonLines, listening, runGateway, type Proc } from '../helpers/process.js';

// An upstream failure on a pass-through path is one WARN line that says what the client got:
// the same status and code as the answer, the underlying error's code, and no stack trace.

let upstream: FakeUpstream | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
  gateway = upstream = undefined;
});

function linesFor(g: TestGateway | undefined, requestId: string) {
  if (!g) throw new Error('no gateway');
  return g.logLines().filter((l) => l.requestId === requestId && l.msg !== 'request completed');
}

describe('an upstream failure on a pass-through path', () => {
  it('connection refused: one WARN with the 502 the client got', async () => {
    gateway = await startGateway({ upstream: { url: `http://127.0.0.1:${await freePort()}/v1` } });
    const res = await fetch(`${gateway.baseUrl}/models`);
    const body = (await res.json()) as any;
    expect(res.status).toBe(502);
    expect(body.error.code).toBe('upstream_unreachable');
    expect(body.error.message).toMatch(/^The upstream could not be reached \(connect ECONNREFUSED 127\.0\.0\.1:\d+\)\.$/);

    const lines = linesFor(gateway, res.headers.get('x-request-id')!);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, status: 502, code: 'upstream_unreachable', cause: 'ECONNREFUSED' });
    expect(lines[0].msg).toBe(`answered 502 upstream_unreachable: ${body.error.message}`);
    expect(gateway.logText()).not.toMatch(/"stack"|\bat .*\.js:\d+/);
    expect(gateway.logText()).not.toMatch(/"statusCode":503|ECONNREFUSED: connect ECONNREFUSED/);
  });

  it('headers that never come: one WARN with the 504 the client got', async () => {
    upstream = await startFakeUpstream(() => new Promise(() => {}));
    gateway = await startGateway({ upstream: { url: upstream.baseUrl, firstByteTimeoutMs: 200 } });
    const res = await fetch(`${gateway.baseUrl}/models`);
    expect(res.status).toBe(504);
    expect(((await res.json()) as any).error.code).toBe('upstream_timeout');
    const lines = linesFor(gateway, res.headers.get('x-request-id')!);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, status: 504, code: 'upstream_timeout', cause: 'UND_ERR_HEADERS_TIMEOUT' });
    expect(gateway.logText()).not.toMatch(/"stack"/);
  });
});

describe('failureLog (the line chat.ts and pass-through both write)', () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });

  it('before anything was sent: the error status the client got', () => {
    expect(failureLog(fromUpstreamFailure(refused))).toEqual({
      fields: { status: 502, code: 'upstream_unreachable', cause: 'ECONNREFUSED' },
      message: 'answered 502 upstream_unreachable: The upstream could not be reached (connect ECONNREFUSED 127.0.0.1:9).',
    });
  });

  it('after the response started: the status already sent, and that the connection was cut', () => {
    const reset = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
    expect(failureLog(fromUpstreamFailure(reset), 200)).toEqual({
      fields: { status: 200, code: 'upstream_unreachable', cause: 'UND_ERR_SOCKET', cut: true },
      message:
        'cut the connection after 200 was sent (the client sees a truncated response): upstream_unreachable: ' +
        'The upstream could not be reached (UND_ERR_SOCKET: other side closed).',
    });
  });
});

describe('the built process, one upstream down', () => {
  let proc: Proc | undefined;
  afterEach(() => {
    proc?.child.kill('SIGKILL');
    proc = undefined;
  });

  it('names the upstream on the 502 WARN of a chat request as on a pass-through one', async () => {
    proc = runGateway([], { PORT: '0', LOG_FORMAT: 'json', UPSTREAM_URL: `http://127.0.0.1:${await freePort()}/v1` });
    const origin = await listening(proc);
    const chat = await fetch(`${origin}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    const models = await fetch(`${origin}/v1/models`);
    expect([chat.status, models.status]).toEqual([502, 502]);
    for (const res of [chat, models]) {
      const id = res.headers.get('x-request-id');
      await expect.poll(() => jsonLines(proc!).some((l) => l.requestId === id && l.level === 40), { timeout: 10_000 }).toBe(true);
      const warn = jsonLines(proc).filter((l) => l.requestId === id && l.level === 40);
      expect(warn).toEqual([
        expect.objectContaining({ upstream: 'default', status: 502, code: 'upstream_unreachable', cause: 'ECONNREFUSED' }),
      ]);
    }
  });
});
