import { afterAll, beforeAll, expect, it } from 'vitest';
import { startProcess, type BenchProcess } from '../../bench/procs.js';
import { CHAT_PATH, SDK_HEADERS, smallChatBody, streamChatBody } from '../../bench/requests.js';

/*
 * The bench's fake upstream answers a stream to any small body asking for one, wherever
 * `"stream":true` stands: a proxy that re-serialises the body (Portkey puts the model first) must
 * get the stream its client asked for, or the bench compares a stream with a JSON answer.
 */

let upstream: BenchProcess;

beforeAll(async () => {
  upstream = await startProcess('upstream', 'upstream.ts', { answerBytes: 800, streamEvents: 5, streamGapMs: 1, summaryDelayMs: 0 });
});
afterAll(async () => {
  await upstream?.stop();
});

async function ask(body: string) {
  const res = await fetch(`${upstream.origin}${CHAT_PATH}`, { method: 'POST', headers: SDK_HEADERS, body });
  const text = await res.text();
  return { type: res.headers.get('content-type'), events: text.split('\n\n').filter((e) => e.startsWith('data: ')).length };
}

it('streams a body that asks for a stream after its other fields, as one that asks first', async () => {
  const { stream, ...rest } = JSON.parse(streamChatBody()) as Record<string, unknown>;
  const reordered = JSON.stringify({ ...rest, stream });
  expect(reordered.indexOf('"stream":true')).toBeGreaterThan(64);
  expect(await ask(reordered)).toEqual({ type: 'text/event-stream', events: 5 });
  expect(await ask(streamChatBody())).toEqual({ type: 'text/event-stream', events: 5 });
});

it('answers JSON to a body that does not ask for a stream', async () => {
  expect(await ask(smallChatBody())).toEqual({ type: 'application/json', events: 0 });
});
