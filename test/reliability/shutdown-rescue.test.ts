import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, expect, it } from 'vitest';
import { completion, json, sse, startFakeUpstream, streamEvents, type FakeUpstream, type Received } from '../helpers/fake-upstream.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';
import { Client, provider } from './helpers.js';

/*
 * SIGTERM while a rescue is in progress, against the built gateway process (dist/, made by
 * `npm test`'s pretest build): the rescue completes within the grace period, or the process
 * gives up on it when the grace period ends. Never later, never hanging.
 */

const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

interface Proc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; at: number }>;
}

function run(env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', PORT: '0', ...env } });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const exited = new Promise<{ code: number | null; at: number }>((resolve) =>
    child.once('exit', (code) => resolve({ code, at: performance.now() })),
  );
  return { child, output: () => output, exited };
}

async function listening(proc: Proc): Promise<string> {
  await expect.poll(() => /Server listening at (http:\S+)/.test(proc.output()), { timeout: 10_000 }).toBe(true);
  return /Server listening at (http:\/\/[^\s"]+)/.exec(proc.output())![1];
}

let upstream: FakeUpstream | undefined;
let proc: Proc | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  await upstream?.close();
  proc = upstream = undefined;
});

/** A summarizer that answers when `release` is called (or never). */
function gatedSummarizer() {
  let release!: () => void;
  let arrive!: (req: Received) => void;
  const released = new Promise<void>((r) => (release = r));
  const arrived = new Promise<Received>((r) => (arrive = r));
  return {
    release,
    arrived,
    handler: async (req: Received, res: import('node:http').ServerResponse) => {
      arrive(req);
      await Promise.race([released, req.aborted]);
      if (!res.destroyed) json(res, 200, completion('SUMMARY: fixing the build.'));
    },
  };
}

it('SIGTERM during the summarizer call: the rescue completes within the grace period, then exit 0', async () => {
  const summarizer = gatedSummarizer();
  const side = provider({ summarizer: summarizer.handler });
  upstream = await startFakeUpstream(side.handler);
  proc = run({ UPSTREAM_URL: upstream.baseUrl, SHUTDOWN_GRACE_MS: '5000' });
  const origin = await listening(proc);
  const client = new Client();
  const pending = client.post(`${origin}/v1/chat/completions`, agentRequest(60));
  await summarizer.arrived;
  const signalled = performance.now();
  proc.child.kill('SIGTERM');
  await expect.poll(() => proc!.output()).toMatch(/shutting down/);
  summarizer.release();
  const res = await pending;
  expect(res.status).toBe(200);
  expect(parseCompactionHeader(res.headers['x-gateway-compaction'] as string).outcome).toBe('replayed');
  await client.close();
  const exit = await proc.exited;
  expect(exit.code).toBe(0);
  expect(exit.at - signalled).toBeLessThan(5_000);
});

it('SIGTERM during a replayed stream: the stream finishes with [DONE], then exit 0', async () => {
  let arrive!: () => void;
  const streaming = new Promise<void>((r) => (arrive = r));
  const side = provider({
    fits: async (_req, res) => {
      arrive();
      await sse(res, streamEvents(Array.from({ length: 12 }, (_, i) => `t${i} `)), 30);
    },
  });
  upstream = await startFakeUpstream(side.handler);
  proc = run({ UPSTREAM_URL: upstream.baseUrl, SHUTDOWN_GRACE_MS: '5000' });
  const origin = await listening(proc);
  const client = new Client();
  const pending = client.post(`${origin}/v1/chat/completions`, { ...agentRequest(60), stream: true });
  await streaming;
  proc.child.kill('SIGTERM');
  const res = await pending;
  expect(res.status).toBe(200);
  expect(res.text).toContain('t11 ');
  expect(res.text).toContain('[DONE]');
  await client.close();
  expect((await proc.exited).code).toBe(0);
});

it('SIGTERM during a summarizer call that never ends: the process gives up when the grace period ends', async () => {
  const summarizer = gatedSummarizer();
  const side = provider({ summarizer: summarizer.handler });
  upstream = await startFakeUpstream(side.handler);
  proc = run({ UPSTREAM_URL: upstream.baseUrl, SHUTDOWN_GRACE_MS: '1000', SUMMARIZER_TIMEOUT_MS: '60000' });
  const origin = await listening(proc);
  const client = new Client();
  const pending = client.post(`${origin}/v1/chat/completions`, agentRequest(60)).catch((e: Error) => e);
  const summarizerRequest = await summarizer.arrived;
  const signalled = performance.now();
  proc.child.kill('SIGTERM');
  const exit = await proc.exited;
  expect(exit.code).toBe(1);
  expect(exit.at - signalled).toBeGreaterThanOrEqual(900);
  expect(exit.at - signalled).toBeLessThan(1_000 + 1_000);
  expect(proc.output()).toMatch(/grace period over/);
  // The client learns at once (its connection closes); nothing waits on the summarizer any more.
  expect(await pending).toBeInstanceOf(Error);
  await summarizerRequest.aborted;
  await client.close();
});

it('SIGTERM with an idle connection that never sent a request: exit 0 at once, not after the grace period', async () => {
  upstream = await startFakeUpstream(provider().handler);
  proc = run({ UPSTREAM_URL: upstream.baseUrl, SHUTDOWN_GRACE_MS: '5000' });
  const origin = new URL(await listening(proc));
  // A pre-connecting client (or a load balancer's spare connection): connected, silent.
  const silent = connect(Number(origin.port), origin.hostname);
  await new Promise((r) => silent.once('connect', r));
  silent.on('error', () => undefined);
  const closed = new Promise((r) => silent.once('close', r));
  const signalled = performance.now();
  proc.child.kill('SIGTERM');
  const exit = await proc.exited;
  expect(exit.code).toBe(0);
  expect(exit.at - signalled).toBeLessThan(1_500);
  await closed;
});
