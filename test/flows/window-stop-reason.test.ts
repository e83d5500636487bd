import { afterEach, expect, it } from 'vitest';
import { event, message, streamOf } from '../helpers/anthropic.js';
import { claudeRequest } from '../helpers/claude-request.js';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';

/*
 * An answer that stopped because the model's window was exceeded, before it said anything: no
 * error object, HTTP 200, a stop or finish reason (Anthropic's `model_context_window_exceeded`)
 * and no output tokens. The request did not fit: rescued like an overflow. After output it is an
 * answer, relayed as it came.
 */

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

const windowStop = (outputTokens: number) =>
  event('message_delta', {
    delta: { stop_reason: 'model_context_window_exceeded', stop_sequence: null },
    usage: { output_tokens: outputTokens },
  });
const start = event('message_start', {
  message: { ...message('', 100_000), content: [], stop_reason: null, usage: { input_tokens: 199_990, output_tokens: 0 } },
});

async function messagesUpstream(first: string[]) {
  let calls = 0;
  upstream = await startFakeUpstream((req, res) => {
    calls++;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of calls === 1 ? first : streamOf(message('rescued', 10))) res.write(e);
    res.end();
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
}

const postMessages = () =>
  fetch(`${gateway.origin}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-x' },
    body: JSON.stringify({ ...claudeRequest(), stream: true }),
  });

it('Messages: stopped for the window before any content block: rescued, one replay, the client gets the replay', async () => {
  await messagesUpstream([start, windowStop(0), event('message_stop', {})]);
  const res = await postMessages();
  const text = await res.text();
  expect(res.status).toBe(200);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed', reason: 'context_length' });
  expect(upstream.received).toHaveLength(2);
  expect(text).toContain('"text":"rescued"');
  expect(text).not.toContain('model_context_window_exceeded');
});

it('Messages: the same stop after content: relayed byte for byte, never replayed', async () => {
  const first = [
    start,
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'partial' } }),
    event('content_block_stop', { index: 0 }),
    windowStop(7),
    event('message_stop', {}),
  ];
  await messagesUpstream(first);
  const res = await postMessages();
  expect(await res.text()).toBe(first.join(''));
  expect(res.headers.get('x-gateway-compaction')).toBeNull();
  expect(upstream.received).toHaveLength(1);
});

it('chat: a first chunk that only says the window was exceeded, with zero usage, is rescued', async () => {
  const chunk = {
    id: 'chatcmpl-w',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'm',
    choices: [{ index: 0, delta: {}, finish_reason: 'model_context_window_exceeded' }],
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  };
  let calls = 0;
  upstream = await startFakeUpstream((_req, res) => {
    if (++calls > 1) return json(res, 200, completion('rescued answer'));
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(`data: ${JSON.stringify(chunk)}\n\ndata: [DONE]\n\n`);
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const res = await postChat(gateway, agentRequest(30, { stream: true }));
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed' });
  expect(calls).toBe(2);
});

it('chat: `length` with output is an answer, not an overflow', async () => {
  upstream = await startFakeUpstream((_req, res) =>
    json(res, 200, {
      ...completion('cut short'),
      choices: [{ index: 0, message: { role: 'assistant', content: 'cut short' }, finish_reason: 'length' }],
    }),
  );
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const res = await postChat(gateway, agentRequest(30));
  expect(res.json.choices[0].finish_reason).toBe('length');
  expect(res.headers.get('x-gateway-compaction')).toBeNull();
  expect(upstream.received).toHaveLength(1);
});
