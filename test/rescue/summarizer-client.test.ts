import { Agent } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SUMMARY_PROMPT, TRANSCRIPT_RULES } from '../../src/compaction/prompt.js';
import { summarize } from '../../src/compaction/summary-pass.js';
import { SummarizerError, type SummarizerCall } from '../../src/compaction/summarizer-port.js';
import { chat } from '../../src/dialects/chat.js';
import { gemini } from '../../src/dialects/gemini.js';
import { responses } from '../../src/dialects/responses.js';
import { sendingTo, type SummarizerEndpoint } from '../../src/rescue/summarizer-client.js';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';

/*
 * The summarizer's wire, as the rescue builds it (rescue/summarizer-client.ts sendingTo) on the upstream
 * client, against a summarizer on a loopback socket: where each call goes and with what headers,
 * how an answer and a refusal are read, the bound on an answer, and how each way a call can fail
 * is named (the header's `summarizer-failure`). What the calls carry is compaction's
 * (test/compaction/summary-pass.test.ts); the first test runs the two together.
 */

let upstream: FakeUpstream;
const dispatcher = new Agent();
afterAll(() => dispatcher.close());
afterEach(async () => {
  await upstream?.close();
});

function endpoint(over: Partial<SummarizerEndpoint> = {}): SummarizerEndpoint {
  return {
    dispatcher,
    url: `${upstream.baseUrl}//`,
    model: 'summarizer-model',
    wire: chat.summarizer,
    headers: { authorization: 'Bearer sk-summarizer' },
    windowLimit: 1_000,
    gone: new AbortController().signal,
    ...over,
  };
}

const summaryCall = (maxTokens = 1_000): SummarizerCall => ({
  kind: 'summary',
  body: JSON.stringify({ model: 'summarizer-model', messages: [] }),
  maxTokens,
});
const send = (e: SummarizerEndpoint, call = summaryCall(), signal = new AbortController().signal) => sendingTo(e)(call, signal);

async function failure(promise: Promise<unknown>): Promise<SummarizerError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SummarizerError);
  return err as SummarizerError;
}

/** A signal that ends after `ms`, as the compaction's deadline does. */
function after(ms: number): AbortSignal {
  const deadline = new AbortController();
  setTimeout(() => deadline.abort(new DOMException('the summarizer did not answer in time', 'TimeoutError')), ms).unref();
  return deadline.signal;
}

describe('where a call goes', () => {
  it('summarize() through it: the transcript posted in the summarizer API, with its credentials and the summarizer mark; the trimmed text back', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('  The user wants the bug fixed.\n')));
    const items = [
      { who: 'user', text: 'Fix the bug', calls: [] },
      { who: 'assistant', text: '', calls: [{ id: 'c1', name: 'read_file', args: '{"path":"a.ts"}' }] },
    ];
    const settings = {
      request: { model: 'm', max_completion_tokens: 5 },
      deadline: after(10_000),
      maxInputTokens: 100_000,
      maxSummaryTokens: 1_000,
      maxCalls: 16,
      maxInputBytes: 4 * 1024 * 1024,
    };
    const e = endpoint();
    const result = await summarize(items, settings, { wire: e.wire, model: e.model, send: sendingTo(e) });
    expect(result).toEqual({
      text: 'The user wants the bug fixed.',
      calls: 1,
      tokens: { input: 12, output: 3, estimated: false },
      digested: 0,
    });
    expect(upstream.received).toHaveLength(1);
    const [call] = upstream.received;
    expect(call.method).toBe('POST');
    expect(call.url).toBe('/v1/chat/completions');
    expect(call.headers).toMatchObject({
      'content-type': 'application/json',
      accept: 'application/json',
      'x-gateway-compaction': 'summarizer',
      authorization: 'Bearer sk-summarizer',
    });
    expect(call.json).toEqual({
      model: 'summarizer-model',
      messages: [
        { role: 'system', content: `${DEFAULT_SUMMARY_PROMPT}\n\n${TRANSCRIPT_RULES}` },
        {
          role: 'user',
          content: '<conversation>\n[user]\n  Fix the bug\n\n[assistant]\n  -> calls read_file({"path":"a.ts"}) [c1]\n</conversation>',
        },
      ],
      max_completion_tokens: 1_000,
      stream: false,
    });
  });

  it('its own headers override the defaults; the body goes as compaction wrote it', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, completion('ok')));
    const call = summaryCall();
    await send(endpoint({ headers: { accept: 'application/x-custom' } }), call);
    expect(upstream.received[0].headers.accept).toBe('application/x-custom');
    expect(upstream.received[0].headers.authorization).toBeUndefined();
    expect(upstream.received[0].body.toString()).toBe(call.body);
  });

  it.each([
    ['the provider\u2019s compaction, to its own path', responses.summarizer, 'compact', '/v1/responses/compact'],
    ['a summary in the Responses API', responses.summarizer, 'summary', '/v1/responses'],
    [
      'a summary in Gemini\u2019s API, whose path names the model',
      gemini.summarizer,
      'summary',
      '/v1/v1beta/models/summarizer-model:generateContent',
    ],
  ] as const)('%s', async (_name, wire, kind, path) => {
    upstream = await startFakeUpstream((_req, res) => json(res, 200, { output: [] }));
    await send(endpoint({ wire }), { ...summaryCall(), kind });
    expect(upstream.received.map((r) => r.url)).toEqual([path]);
  });
});

describe('how an answer is read', () => {
  it('a refusal comes back as it is, status and text, for compaction to read', async () => {
    upstream = await startFakeUpstream((_req, res) => json(res, 400, '{"error":{"message":"maximum context length is 4096 tokens"}}'));
    expect(await send(endpoint())).toEqual({ status: 400, text: '{"error":{"message":"maximum context length is 4096 tokens"}}' });
    upstream.handle((_req, res) => json(res, 503, ''));
    expect(await send(endpoint())).toEqual({ status: 503, text: '' });
  });

  it('an answer past max(64 KiB, 16 bytes a summary token) is a "bad_response"; one at the limit is read', async () => {
    let size = 65_536;
    upstream = await startFakeUpstream((_req, res) => json(res, 200, 's'.repeat(size)));
    expect((await send(endpoint())).text).toHaveLength(65_536);
    size = 65_537;
    const over = await failure(send(endpoint()));
    expect(over.kind).toBe('bad_response');
    expect(over.message).toBe('summarizer answer exceeded 65536 bytes');
    // 5,000 summary tokens: 80,000 bytes are allowed.
    size = 80_000;
    expect((await send(endpoint(), summaryCall(5_000))).text).toHaveLength(80_000);
    size = 80_001;
    expect((await failure(send(endpoint(), summaryCall(5_000)))).message).toBe('summarizer answer exceeded 80000 bytes');
  });

  it('the provider\u2019s compaction window is read up to upstream.errorBodyLimitBytes', async () => {
    let size = 1_000;
    upstream = await startFakeUpstream((_req, res) => json(res, 200, 'w'.repeat(size)));
    const compact = { ...summaryCall(), kind: 'compact' as const, maxTokens: 0 };
    const e = endpoint({ wire: responses.summarizer, windowLimit: 1_000 });
    expect((await send(e, compact)).text).toHaveLength(1_000);
    size = 1_001;
    expect((await failure(send(e, compact))).message).toBe('summarizer answer exceeded 1000 bytes');
  });
});

describe('how a failure is named', () => {
  it('no answer before the call\u2019s signal ends it is a "timeout"', async () => {
    upstream = await startFakeUpstream(() => undefined);
    const err = await failure(send(endpoint(), summaryCall(), after(100)));
    expect(err.kind).toBe('timeout');
    expect(err.message).toBe('the summarizer did not answer in time');
  });

  it('the dispatcher giving up waiting for headers is a "timeout" too', async () => {
    upstream = await startFakeUpstream(() => undefined);
    const impatient = new Agent({ headersTimeout: 100 });
    const err = await failure(send(endpoint({ dispatcher: impatient })));
    await impatient.close();
    expect(err.kind).toBe('timeout');
  });

  it('the client going away is "aborted", whatever the call was doing', async () => {
    const client = new AbortController();
    upstream = await startFakeUpstream(() => client.abort());
    const err = await failure(send(endpoint({ gone: client.signal })));
    expect(err.kind).toBe('aborted');
    expect(err.message).toBe('the client went away');
    // Gone before the call: it is not made.
    const before = upstream.received.length;
    expect((await failure(send(endpoint({ gone: client.signal })))).kind).toBe('aborted');
    expect(upstream.received).toHaveLength(before);
  });

  it('an answer that stalls after its headers is a "timeout"; one whose connection drops is "unreachable"', async () => {
    upstream = await startFakeUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"choices":');
    });
    expect((await failure(send(endpoint(), summaryCall(), after(100)))).kind).toBe('timeout');
    upstream.handle((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"choices":', () => res.destroy());
    });
    const dropped = await failure(send(endpoint()));
    expect(dropped.kind).toBe('unreachable');
    expect(dropped.message).toBe('the summarizer could not be reached (UND_ERR_SOCKET)');
  });

  it('a summarizer that cannot be reached is "unreachable", with the cause', async () => {
    upstream = await startFakeUpstream();
    const closed = upstream.origin;
    await upstream.close();
    const err = await failure(send(endpoint({ url: closed })));
    expect(err.kind).toBe('unreachable');
    expect(err.message).toBe('the summarizer could not be reached (ECONNREFUSED)');
  });
});
