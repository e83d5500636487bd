import type { ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, streamEvents, type FakeUpstream } from '../helpers/fake-upstream.js';
import { freePort } from '../helpers/ports.js';
import { listening, portOpen, runGateway, type Exit, type Proc } from '../helpers/process.js';

/*
 * Once SIGTERM arrives, the built process exits within server.shutdownGraceMs plus a second,
 * whatever else happens. Each case below is one thing that could hold it: it must exit in time
 * (0 when everything in flight could finish, 1 when the grace period had to cut something),
 * and its port must be free afterwards.
 */

const GRACE_MS = 1_000;
/** The promise: the grace period plus a second. */
const BOUND_MS = GRACE_MS + 1_000;
const THROWING_LOG = fileURLToPath(new URL('../helpers/faults/log-write-throws.cjs', import.meta.url));

let upstream: FakeUpstream | undefined;
let proc: Proc | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  await upstream?.close();
  proc = upstream = undefined;
});

/** An upstream whose streamed answer waits, after two events, until the test releases it. */
async function gatedStream() {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const events = streamEvents(['one', 'two', 'three']);
  upstream = await startFakeUpstream(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(events[0]);
    res.write(events[1]);
    await Promise.race([released, new Promise((r) => res.once('close', r))]);
    for (const e of events.slice(2)) res.write(e);
    res.end();
  });
  return { release, baseUrl: upstream.baseUrl };
}

/** Starts a streamed chat request and returns once its first bytes arrived, with the rest to read. */
async function openStream(origin: string): Promise<() => Promise<string>> {
  const res = await fetch(`${origin}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const reader = res.body!.getReader();
  let text = new TextDecoder().decode((await reader.read()).value);
  return async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += new TextDecoder().decode(value);
    }
  };
}

async function signalAndWait(p: Proc, bound = BOUND_MS): Promise<{ exit: Exit; tookMs: number }> {
  const signalled = performance.now();
  p.child.kill('SIGTERM');
  const exit = await p.exitWithin(bound + 3_000);
  expect(exit, `still running ${bound + 3_000} ms after SIGTERM`).not.toBe('still running');
  return { exit: exit as Exit, tookMs: (exit as Exit).at - signalled };
}

const portOf = (origin: string) => Number(new URL(origin).port);

describe('shutdown always ends', () => {
  it('a log write that throws in the signal handler: the stream still finishes, then exit 0', async () => {
    const gate = await gatedStream();
    proc = runGateway([], { PORT: '0', UPSTREAM_URL: gate.baseUrl, SHUTDOWN_GRACE_MS: String(GRACE_MS * 5) }, ['--require', THROWING_LOG]);
    const origin = await listening(proc);
    const rest = await openStream(origin);
    const signalled = performance.now();
    proc.child.kill('SIGTERM');
    // Draining has begun although the handler's log line failed: new connections are refused.
    await expect.poll(() => portOpen(portOf(origin)), { timeout: 5_000 }).toBe(false);
    gate.release();
    expect(await rest()).toContain('[DONE]');
    const exit = (await proc.exitWithin(GRACE_MS * 5 + 4_000)) as Exit;
    expect(exit.code).toBe(0);
    expect(exit.at - signalled).toBeLessThan(GRACE_MS * 5 + 1_000);
  });

  it('stdout closed (every log write fails with EPIPE): the stream finishes, then exit 0', async () => {
    const gate = await gatedStream();
    proc = runGateway([], { PORT: '0', UPSTREAM_URL: gate.baseUrl, SHUTDOWN_GRACE_MS: String(GRACE_MS) });
    const origin = await listening(proc);
    proc.child.stdout!.destroy();
    const rest = await openStream(origin);
    const stopping = signalAndWait(proc);
    gate.release();
    expect(await rest()).toContain('[DONE]');
    const { exit, tookMs } = await stopping;
    expect(exit.code).toBe(0);
    expect(tookMs).toBeLessThan(BOUND_MS);
    expect(await portOpen(portOf(origin))).toBe(false);
  });

  // With its stdout piped, a process gets a blocking fd 1, and pino writes it from libuv's thread
  // pool: a full pipe left that thread in write(2), and process.exit() waited for it forever.
  it('stdout never read (the pipe is full and log writes block): exit in time', async () => {
    upstream = await startFakeUpstream();
    proc = runGateway([], { PORT: '0', UPSTREAM_URL: upstream.baseUrl, SHUTDOWN_GRACE_MS: String(GRACE_MS), LOG_LEVEL: 'debug' });
    const origin = await listening(proc);
    proc.child.stdout!.pause();
    // About 2 MB of access-log lines (each names its 4 KB path), which nobody reads any more: far
    // more than a pipe or a socket pair holds.
    const long = `/not-a-route/${'x'.repeat(4_000)}`;
    for (let batch = 0; batch < 20; batch++) {
      await Promise.all(Array.from({ length: 25 }, () => fetch(`${origin}${long}`).then((r) => r.text())));
    }
    const { exit, tookMs } = await signalAndWait(proc);
    expect(exit.code === 0 || exit.code === 1).toBe(true);
    expect(tookMs).toBeLessThan(BOUND_MS);
    expect(await portOpen(portOf(origin))).toBe(false);
  });

  it('a connection that never finishes its request: exit 1 when the grace period ends', async () => {
    upstream = await startFakeUpstream();
    proc = runGateway([], { PORT: '0', UPSTREAM_URL: upstream.baseUrl, SHUTDOWN_GRACE_MS: String(GRACE_MS) });
    const origin = await listening(proc);
    const socket = connect(portOf(origin), '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise((r) => socket.once('connect', r));
    // Headers promise 1,000 bytes of body; ten arrive, and then nothing.
    socket.write(
      'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"model":"',
    );
    await new Promise((r) => setTimeout(r, 100));
    const { exit, tookMs } = await signalAndWait(proc);
    expect(exit.code).toBe(1);
    expect(tookMs).toBeGreaterThanOrEqual(GRACE_MS - 100);
    expect(tookMs).toBeLessThan(BOUND_MS);
    expect(proc.output()).toMatch(/grace period over/);
    socket.destroy();
  });

  it('an upstream that never sends headers: exit 1 when the grace period ends', async () => {
    let arrive!: () => void;
    const arrived = new Promise<void>((r) => (arrive = r));
    upstream = await startFakeUpstream(() => {
      arrive();
      return new Promise(() => {});
    });
    proc = runGateway([], { PORT: '0', UPSTREAM_URL: upstream.baseUrl, SHUTDOWN_GRACE_MS: String(GRACE_MS) });
    const origin = await listening(proc);
    const pending = fetch(`${origin}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    }).catch((e: Error) => e);
    await arrived;
    const { exit, tookMs } = await signalAndWait(proc);
    expect(exit.code).toBe(1);
    expect(tookMs).toBeGreaterThanOrEqual(GRACE_MS - 100);
    expect(tookMs).toBeLessThan(BOUND_MS);
    expect(await pending).toBeInstanceOf(Error);
  });

  it('a pass-through upstream that stalls mid-body: exit 1 when the grace period ends', async () => {
    let arrive!: () => void;
    const arrived = new Promise<void>((r) => (arrive = r));
    upstream = await startFakeUpstream((_req, res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"data":[');
      arrive();
      return new Promise(() => {});
    });
    proc = runGateway([], { PORT: '0', UPSTREAM_URL: upstream.baseUrl, SHUTDOWN_GRACE_MS: String(GRACE_MS) });
    const origin = await listening(proc);
    const pending = fetch(`${origin}/v1/models`)
      .then((r) => r.text())
      .catch((e: Error) => e);
    await arrived;
    const { exit, tookMs } = await signalAndWait(proc);
    expect(exit.code).toBe(1);
    expect(tookMs).toBeLessThan(BOUND_MS);
    expect(await pending).toBeInstanceOf(Error);
  });

  it('Redis down (memory on Redis, nothing listening): nothing waits on it, exit 0 at once', async () => {
    const gate = await gatedStream();
    proc = runGateway([], {
      PORT: '0',
      UPSTREAM_URL: gate.baseUrl,
      SHUTDOWN_GRACE_MS: String(GRACE_MS * 10),
      MEMORY_REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
    });
    const origin = await listening(proc);
    await expect.poll(() => proc!.output(), { timeout: 10_000 }).toMatch(/gateway ready/);
    const rest = await openStream(origin);
    const stopping = signalAndWait(proc, GRACE_MS * 10);
    gate.release();
    expect(await rest()).toContain('[DONE]');
    const { exit, tookMs } = await stopping;
    expect(exit.code).toBe(0);
    // Well inside the (long) grace period: a reconnecting Redis client holds nothing open.
    expect(tookMs).toBeLessThan(GRACE_MS * 4);
  });
});
