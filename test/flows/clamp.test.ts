import { afterEach, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';

/*
 * Lossless first: when the numbers show that the prompt fits and only prompt plus the requested
 * completion does not, the replay lowers the completion limit and changes nothing else.
 */

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

const isSummarizer = (r: { headers: Record<string, unknown> }) => r.headers['x-gateway-compaction'] === 'summarizer';
const plusCompletion = (prompt: number, completionTokens: number, window: number) =>
  JSON.stringify({
    error: {
      message: `This model's maximum context length is ${window} tokens. However, you requested ${prompt + completionTokens} tokens (${prompt} in the messages, ${completionTokens} in the completion). Please reduce the length of the messages or completion.`,
      type: 'invalid_request_error',
      param: 'messages',
      code: 'context_length_exceeded',
    },
  });

async function setup(firstAnswer: string) {
  upstream = await startFakeUpstream((req, res) => {
    if (isSummarizer(req)) return json(res, 200, completion('SUMMARY: the user asked to fix the build.'));
    const chats = upstream.received.filter((r) => !isSummarizer(r));
    return chats.length === 1 ? json(res, 400, firstAnswer) : json(res, 200, completion('rescued'));
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
}

it('the prompt fits, prompt plus completion does not: max_tokens is lowered, nothing else changes, no summary', async () => {
  await setup(plusCompletion(8_000, 32_000, 37_000));
  const body = agentRequest(10, { max_tokens: 32_000 });
  const res = await postChat(gateway, body);
  expect(res.status).toBe(200);
  const [first, replay] = upstream.received.filter((r) => !isSummarizer(r));
  expect(upstream.received.filter(isSummarizer)).toHaveLength(0);
  const lowered = 37_000 - 8_000 - 370;
  expect(replay.json).toEqual({ ...first.json, max_tokens: lowered });
  expect(replay.body.toString()).toBe(JSON.stringify({ ...body, max_tokens: lowered }));
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({
    outcome: 'replayed',
    strategy: 'clamp',
    limit: 'stated',
    'completion-before': 32_000,
    'completion-after': lowered,
  });
  const warn = gateway.logLines().find((l) => l.level === 40 && /overlong/.test(l.msg));
  expect(warn.msg).toMatch(/the prompt fits; lowered the completion limit from 32000 to 28630, replayed once: the upstream answered 200/);
});

it('max_completion_tokens is the field lowered when the request used it', async () => {
  await setup(plusCompletion(8_000, 32_000, 37_000));
  const body = agentRequest(10, { max_tokens: undefined, max_completion_tokens: 32_000 });
  await postChat(gateway, body);
  const replay = upstream.received.filter((r) => !isSummarizer(r))[1];
  expect(replay.json.max_completion_tokens).toBe(28_630);
  expect(replay.json.max_tokens).toBeUndefined();
});

it('when the lowered limit would fall under compaction.minCompletionTokens, the conversation is compacted instead', async () => {
  await setup(plusCompletion(36_500, 4_000, 37_000));
  const res = await postChat(gateway, agentRequest(60, { max_tokens: 4_000 }));
  expect(res.status).toBe(200);
  // Compacted by its first rung, masking old tool outputs: no summarizer call, max_tokens as sent.
  expect(upstream.received.filter(isSummarizer)).toHaveLength(0);
  const header = parseCompactionHeader(res.headers.get('x-gateway-compaction'));
  expect(header).toMatchObject({ outcome: 'replayed', strategy: 'mask' });
  expect(header['completion-after']).toBeUndefined();
  const [first, replay] = upstream.received.filter((r) => !isSummarizer(r));
  expect(replay.json.max_tokens).toBe(4_000);
  expect(replay.body.length).toBeLessThan(first.body.length);
});

it('a 400 that counts only the messages: a 60 KB fixed prompt with max_tokens 32,000 of a 37,000-token window is compacted, not refused', async () => {
  const window = 37_000;
  upstream = await startFakeUpstream((req, res) => {
    if (isSummarizer(req)) return json(res, 200, completion('SUMMARY: the user asked to fix the build.'));
    const tokens = Math.ceil(req.body.length / 4);
    if (tokens > window) {
      return json(res, 400, {
        error: {
          message: `This model's maximum context length is ${window} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      });
    }
    return json(res, 200, completion('rescued'));
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl }, summarizer: { maxInputTokens: 500_000 } });
  const body = agentRequest(60, { max_tokens: 32_000 }, 2_000) as any;
  body.messages[0].content = `You are a coding agent.\n${'Rules and conventions. '.repeat(1_300)}`;
  body.tools = Array.from({ length: 20 }, (_, i) => ({
    type: 'function',
    function: { name: `tool_${i}`, description: 'd'.repeat(1_400), parameters: { type: 'object' } },
  }));
  expect(JSON.stringify({ ...body, messages: [body.messages[0]] }).length).toBeGreaterThan(55_000);
  expect(JSON.stringify(body).length / 4).toBeGreaterThan(window);
  const res = await postChat(gateway, body);
  expect(res.status).toBe(200);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({
    outcome: 'replayed',
    strategy: 'summarize',
    limit: 'stated',
  });
});

it('the summary says what happened: a 413 is a size limit, a 400 a context window', async () => {
  for (const [status, text, words] of [
    [413, '<html><body><h1>413 Request Entity Too Large</h1></body></html>', "exceeded the upstream's size limit"],
    [400, plusCompletion(90_000, 0, 60_000), "exceeded the model's context window"],
  ] as const) {
    upstream = await startFakeUpstream((req, res) => {
      if (isSummarizer(req)) return json(res, 200, completion('SUMMARY.'));
      if (upstream.received.filter((r) => !isSummarizer(r)).length === 1) {
        res.writeHead(status, { 'content-type': status === 413 ? 'text/html' : 'application/json' });
        res.end(text);
        return;
      }
      return json(res, 200, completion('rescued'));
    });
    // Masking off: the summary is what is read.
    gateway = await startGateway({
      upstream: { url: upstream.baseUrl },
      summarizer: { maxInputTokens: 500_000 },
      compaction: { mask: false },
    });
    await postChat(gateway, agentRequest(60));
    const replay = upstream.received.filter((r) => !isSummarizer(r))[1];
    const summary = replay.json.messages.find((m: any) => String(m.content).startsWith('[compaction-gateway]'));
    expect(summary.content).toContain(words);
    await gateway.close();
    await upstream.close();
  }
});
