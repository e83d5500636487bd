import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { jsonLines, listening, runGateway, type Proc } from '../helpers/process.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';

// What an operator with a collector sees of a rescue: the built gateway, started with the standard
// OTEL_EXPORTER_OTLP_ENDPOINT, exports to a real OTLP/HTTP receiver on loopback; without it, nothing.

const LIMIT = 60_000;
const SERVER = 2;
const CLIENT = 3;
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

let receiver: OtlpReceiver;
let provider: StandIn;
let proc: Proc | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  proc = undefined;
  await provider?.close();
  await receiver?.close();
});

async function start(env: (receiver: OtlpReceiver) => Record<string, string>): Promise<string> {
  receiver = await startOtlpReceiver();
  provider = await startStandIn({ limitBytes: LIMIT, tooLong: 'stated', reply: () => ({ text: 'rescued answer' }) });
  // The summarizer is the upstream's own model, with a window wide enough for the whole middle.
  proc = runGateway([], {
    PORT: '0',
    LOG_FORMAT: 'json',
    UPSTREAM_URL: provider.baseUrl,
    SUMMARIZER_MAX_INPUT_TOKENS: '500000',
    ...env(receiver),
  });
  return listening(proc);
}

/** SIGTERM, and the exit within a bound: the last spans go out on the way. */
async function stop(): Promise<void> {
  proc!.child.kill('SIGTERM');
  expect(await proc!.exitWithin(15_000)).toMatchObject({ code: 0 });
}

/** A client's span: W3C trace context, sampled. */
function clientSpan(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

const sdk = (origin: string) => new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'sk-client-secret', maxRetries: 0 });

/** Every text the conversation holds, long enough to be recognised anywhere. */
function contents(body: ReturnType<typeof agentRequest>): string[] {
  const texts: string[] = [];
  const walk = (v: unknown) => {
    if (typeof v === 'string' && v.length >= 24) texts.push(v.slice(0, 40));
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') Object.values(v).forEach(walk);
  };
  walk(body.messages);
  return texts;
}

describe('traces, with OTEL_EXPORTER_OTLP_ENDPOINT set', () => {
  it('a rescue: a server span under the client’s, its two attempts and summarizer calls under it, each upstream call with its own span; streamed, compacted ahead on fastify’s path, and a pass-through too', async () => {
    const origin = await start((r) => ({ OTEL_EXPORTER_OTLP_ENDPOINT: r.origin }));
    const client = clientSpan();
    const body = agentRequest(60);
    expect(JSON.stringify(body).length).toBeGreaterThan(LIMIT);
    const { data, response } = await sdk(origin)
      .chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming, { headers: { traceparent: client.traceparent } })
      .withResponse();
    expect(data.choices[0].message.content).toBe('rescued answer');
    const header = parseCompactionHeader(response.headers.get('x-gateway-compaction'));
    expect(header).toMatchObject({ outcome: 'replayed', strategy: 'summarize' });
    // Another conversation, streamed: the replay's span ends with the stream it relays.
    const streamed = clientSpan();
    const stream = await sdk(origin).chat.completions.create(
      { ...(agentRequest(61) as OpenAI.ChatCompletionCreateParamsNonStreaming), stream: true },
      { headers: { traceparent: streamed.traceparent } },
    );
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toBe('rescued answer');
    // The same conversation again, on a path only fastify's router serves (it decodes it): compacted ahead from memory.
    const again = clientSpan();
    const ahead = await fetch(`${origin}/v1/chat/%63ompletions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-client-secret', traceparent: again.traceparent },
      body: JSON.stringify(body),
    });
    expect(ahead.status).toBe(200);
    expect(parseCompactionHeader(ahead.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
    // A probe is not traced; a pass-through request is, under its own client span.
    expect((await fetch(`${origin}/healthz`)).status).toBe(200);
    const other = clientSpan();
    expect(
      (await fetch(`${origin}/v1/models`, { headers: { traceparent: other.traceparent, authorization: 'Bearer sk-client-secret' } }))
        .status,
    ).toBe(200);
    await stop();

    expect(receiver.refused()).toEqual([]);
    const spans = receiver.spans();
    const servers = spans.filter((s) => s.kind === SERVER);
    expect(servers.map((s) => s.attributes['url.path']).sort()).toEqual([
      '/v1/chat/%63ompletions',
      '/v1/chat/completions',
      '/v1/chat/completions',
      '/v1/models',
    ]);
    const server = servers.find((s) => s.traceId === client.traceId)!;
    expect(server).toMatchObject({ traceId: client.traceId, parentSpanId: client.spanId, name: 'POST /v1/chat/completions', status: 0 });
    expect(server.resource).toMatchObject({ 'service.name': 'compaction-gateway', 'service.version': VERSION });
    const access = jsonLines(proc!).find((l) => l.msg === 'request completed' && l.path === '/v1/chat/completions');
    expect(server.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/v1/chat/completions',
      'http.response.status_code': 200,
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'fake-model',
      'openai.api.type': 'chat_completions',
      'gen_ai.conversation.compacted': true,
      'gateway.upstream.name': access.upstream,
      'gateway.compaction.outcome': 'replayed',
      'gateway.compaction.trigger': 'rejected',
      'gateway.compaction.reason': 'context_length',
      'gateway.compaction.remedy': 'compaction',
      'gateway.compaction.strategy': 'summarize',
      'gateway.compaction.bytes_before': header['bytes-before'],
      'gateway.compaction.bytes_after': header['bytes-after'],
      'gateway.compaction.summarizer_calls': summarizedFor(client.traceId).length,
    });

    const children = spans.filter((s) => s.parentSpanId === server.spanId);
    expect(children.every((s) => s.traceId === client.traceId && s.kind === CLIENT)).toBe(true);
    const attempts = children.filter((s) => s.attributes['gateway.summarizer'] === undefined).sort(byStart);
    const summarizer = children.filter((s) => s.attributes['gateway.summarizer'] === true);
    expect(attempts).toHaveLength(2);
    expect(summarizer.length).toBeGreaterThanOrEqual(1);
    expect(summarizer).toHaveLength(summarizedFor(client.traceId).length);
    expect(children).toHaveLength(attempts.length + summarizer.length);

    const where = {
      'server.address': '127.0.0.1',
      'server.port': Number(new URL(provider.origin).port),
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'fake-model',
    };
    const [first, replay] = attempts;
    expect(first).toMatchObject({ name: 'chat fake-model', status: 2 });
    expect(first.attributes).toMatchObject({
      ...where,
      'gen_ai.operation.name': 'chat',
      'http.response.status_code': 400,
      'error.type': '400',
      'gateway.overlong': true,
      'gateway.attempt.rewritten': false,
    });
    expect(first.attributes['gen_ai.conversation.compacted']).toBeUndefined();
    expect(replay).toMatchObject({ name: 'chat fake-model', status: 0 });
    expect(replay.attributes).toMatchObject({
      ...where,
      'http.response.status_code': 200,
      'gateway.attempt.rewritten': true,
      'gen_ai.conversation.compacted': true,
    });
    for (const call of summarizer) {
      // The usage the stand-in's answer to that call stated: its prompt at 4 bytes a token, 5 tokens out.
      const received = summarizedFor(client.traceId).find((r) => r.headers.traceparent === `00-${client.traceId}-${call.spanId}-01`)!;
      expect(call.name).toBe('chat fake-model');
      expect(call.attributes).toMatchObject({
        ...where,
        'gen_ai.operation.name': 'chat',
        'http.response.status_code': 200,
        'gen_ai.usage.input_tokens': Math.ceil(received.body.length / 4),
        'gen_ai.usage.output_tokens': 5,
      });
    }

    // The upstream heard of each call's own span, never of the client's.
    // The strict rules refused each conversation's first attempt as past the window and took every replay, and the request sent ahead.
    const window = expect.stringMatching(/maximum context length is 15000 tokens/);
    expect(provider.verdicts('chat')).toEqual([window, null, window, null, null]);
    const sent = provider
      .calls('chat')
      .filter((r) => r.headers.traceparent?.includes(client.traceId))
      .map((r) => r.headers.traceparent);
    expect(sent).toEqual(attempts.map((a) => `00-${client.traceId}-${a.spanId}-01`));
    const summarized = summarizedFor(client.traceId)
      .map((r) => r.headers.traceparent)
      .sort();
    expect(summarized).toEqual(summarizer.map((s) => `00-${client.traceId}-${s.spanId}-01`).sort());

    const streamedServer = servers.find((s) => s.traceId === streamed.traceId)!;
    expect(streamedServer).toMatchObject({ parentSpanId: streamed.spanId, name: 'POST /v1/chat/completions' });
    expect(streamedServer.attributes).toMatchObject({ 'gen_ai.conversation.compacted': true, 'gateway.compaction.outcome': 'replayed' });
    const streamedAttempts = spans
      .filter((s) => s.parentSpanId === streamedServer.spanId && s.attributes['gateway.summarizer'] === undefined)
      .sort(byStart);
    expect(streamedAttempts.map((s) => s.attributes['http.response.status_code'])).toEqual([400, 200]);
    expect(
      provider
        .calls('chat')
        .filter((r) => r.headers.traceparent?.includes(streamed.traceId))
        .map((r) => r.headers.traceparent),
    ).toEqual(streamedAttempts.map((a) => `00-${streamed.traceId}-${a.spanId}-01`));

    const fromMemory = servers.find((s) => s.attributes['url.path'] === '/v1/chat/%63ompletions')!;
    expect(fromMemory).toMatchObject({ traceId: again.traceId, parentSpanId: again.spanId, name: 'POST /v1/chat/completions' });
    expect(fromMemory.attributes).toMatchObject({
      'gen_ai.conversation.compacted': true,
      'gateway.compaction.outcome': 'compacted',
      'gateway.compaction.trigger': 'proactive',
    });
    const [aheadAttempt, ...more] = spans.filter((s) => s.parentSpanId === fromMemory.spanId);
    expect(more).toEqual([]);
    expect(aheadAttempt.attributes).toMatchObject({
      ...where,
      'http.response.status_code': 200,
      'gateway.attempt.rewritten': true,
      'gen_ai.conversation.compacted': true,
    });
    expect(
      provider
        .calls('chat')
        .filter((r) => r.headers.traceparent?.includes(again.traceId))
        .map((r) => r.headers.traceparent),
    ).toEqual([`00-${again.traceId}-${aheadAttempt.spanId}-01`]);

    const passthrough = servers.find((s) => s.attributes['url.path'] === '/v1/models')!;
    expect(passthrough).toMatchObject({ traceId: other.traceId, parentSpanId: other.spanId, name: 'GET' });
    expect(passthrough.attributes).toMatchObject({ 'http.response.status_code': 200, 'gateway.route': 'passthrough_models' });
    // A pass-through request goes as it came, its trace context too (docs/telemetry.md).
    // (The gateway's own window discovery asks /v1/models too, marked as its own, untraced.)
    const listed = provider.received.filter((r) => r.url === '/v1/models' && r.headers['x-gateway-compaction'] !== 'discovery');
    expect(listed.map((r) => r.headers.traceparent)).toEqual([other.traceparent]);

    // Names, models, sizes and statuses only: no message, summary, answer or key anywhere.
    const exported = receiver.payloads().join('\n');
    const secrets = [...contents(body), ...contents(agentRequest(61)), 'rescued answer', 'SUMMARY of', 'sk-client-secret'];
    expect(secrets.length).toBeGreaterThan(20);
    expect(secrets.filter((text) => exported.includes(text))).toEqual([]);
  }, 60_000);

  it('a request taken as sent, its answer whole with its headers: the usage the answer stated is on the attempt span', async () => {
    const origin = await start((r) => ({ OTEL_EXPORTER_OTLP_ENDPOINT: r.origin }));
    const client = clientSpan();
    const data = await sdk(origin).chat.completions.create(
      { model: 'fake-model', messages: [{ role: 'user', content: 'Review src/.' }] },
      { headers: { traceparent: client.traceparent } },
    );
    expect(data.choices[0].message.content).toBe('rescued answer');
    await stop();

    const [received] = provider.calls('chat');
    expect(provider.verdicts('chat')).toEqual([null]);
    const attempts = receiver.spans().filter((s) => s.traceId === client.traceId && s.kind === CLIENT);
    expect(attempts).toHaveLength(1);
    expect(attempts[0].attributes).toMatchObject({
      'gateway.attempt.rewritten': false,
      'http.response.status_code': 200,
      'gen_ai.usage.input_tokens': Math.ceil(received.body.length / 4),
      'gen_ai.usage.output_tokens': 5,
    });
    expect(data.usage).toMatchObject({ prompt_tokens: Math.ceil(received.body.length / 4), completion_tokens: 5 });
  }, 60_000);
});

describe('traces, with no endpoint set', () => {
  it('nothing is loaded or sent: the receiver sees no connection, and the client’s traceparent reaches the upstream as it was', async () => {
    // The SDK's own variables alone turn nothing on.
    const origin = await start(() => ({ OTEL_SERVICE_NAME: 'should-not-matter', OTEL_BSP_SCHEDULE_DELAY: '10' }));
    const client = clientSpan();
    const data = await sdk(origin).chat.completions.create(agentRequest(60) as OpenAI.ChatCompletionCreateParamsNonStreaming, {
      headers: { traceparent: client.traceparent },
    });
    expect(data.choices[0].message.content).toBe('rescued answer');
    await stop();

    expect(provider.calls('chat').map((r) => r.headers.traceparent)).toEqual([client.traceparent, client.traceparent]);
    expect(provider.verdicts('chat')).toEqual([expect.stringMatching(/maximum context length is 15000 tokens/), null]);
    expect(provider.calls('chat')[1].headers['x-gateway-compaction']).toMatch(/outcome=replayed/);
    expect(provider.summarizerCalls().length).toBeGreaterThanOrEqual(1);
    expect(provider.summarizerCalls().map((r) => r.headers.traceparent)).toEqual(provider.summarizerCalls().map(() => undefined));
    expect(receiver.connections()).toBe(0);
    expect(proc!.output()).not.toMatch(/traces go to/);
  }, 60_000);
});

/** The summarizer calls the provider received in one trace (by the traceparent they carried). */
function summarizedFor(traceId: string) {
  return provider.summarizerCalls().filter((r) => String(r.headers.traceparent).includes(traceId));
}

function byStart(a: ReceivedSpan, b: ReceivedSpan): number {
  return a.start < b.start ? -1 : a.start > b.start ? 1 : 0;
}
