import OpenAI from 'openai';
import { afterEach, expect, it } from 'vitest';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { listening, runGateway, type Proc } from '../helpers/process.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';
import { startOtlpReceiver, type OtlpReceiver } from '../telemetry/otlp-receiver.js';

/*
 * The caller's W3C baggage (its own key-values: a user, a session) never reaches a summarizer
 * call, traced or not (#44, finding 10). A traced request's context holds the baggage the caller
 * sent, and the propagator wrote it into every summarizer call beside the call's traceparent.
 * The attempts are the caller's own request and carry its headers as it sent them.
 */

const LIMIT = 60_000;
const BAGGAGE = 'user.id=alice-4711,session.secret=s3cr3t';

let receiver: OtlpReceiver | undefined;
let provider: StandIn;
let proc: Proc | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  proc = undefined;
  await provider?.close();
  await receiver?.close();
  receiver = undefined;
});

it.each([
  ['traced (OTEL_EXPORTER_OTLP_ENDPOINT set)', true],
  ['untraced', false],
])('%s: summarizer calls carry no baggage; the attempts carry the caller’s as it sent it', { timeout: 30_000 }, async (_name, traced) => {
  receiver = traced ? await startOtlpReceiver() : undefined;
  provider = await startStandIn({ limitBytes: LIMIT, tooLong: 'stated', reply: () => ({ text: 'rescued answer' }) });
  proc = runGateway([], {
    PORT: '0',
    LOG_FORMAT: 'json',
    UPSTREAM_URL: provider.baseUrl,
    SUMMARIZER_MAX_INPUT_TOKENS: '500000',
    ...(receiver ? { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.origin } : {}),
  });
  const origin = await listening(proc);
  const client = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'sk-client', maxRetries: 0 });
  const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  const { data, response } = await client.chat.completions
    .create(agentRequest(60) as OpenAI.ChatCompletionCreateParamsNonStreaming, { headers: { baggage: BAGGAGE, traceparent } })
    .withResponse();
  expect(data.choices[0].message.content).toBe('rescued answer');
  expect(parseCompactionHeader(response.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed', strategy: 'summarize' });

  const summarizer = provider.summarizerCalls();
  expect(summarizer.length).toBeGreaterThanOrEqual(1);
  for (const call of summarizer) {
    expect(call.headers.baggage).toBeUndefined();
    expect(JSON.stringify(call.headers)).not.toContain('alice-4711');
    // Traced, each carries the trace it belongs to: the gateway's own span, under the caller's trace.
    if (traced) expect(call.headers.traceparent).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
  }
  const attempts = provider.calls('chat').filter((r) => !summarizer.includes(r));
  expect(attempts).toHaveLength(2);
  for (const attempt of attempts) expect(attempt.headers.baggage).toBe(BAGGAGE);
});
