import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { jsonLines, listening, runGateway, type Proc } from '../helpers/process.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';

// The built gateway writes one line per rescue, when its end is known: the outcome the client's
// header says, the replay's status, WARN for a request saved (or one the client opted out of
// rescuing), ERROR for one whose client got the upstream's error although the gateway would have
// helped. An operator grepping WARN and ERROR lines counts rescues as they ended, and
// gateway_rescues_total counts each by the same outcome, replayed or not.

let provider: StandIn | undefined;
let proc: Proc | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  await provider?.close();
  proc = provider = undefined;
});

async function gateway(env: Record<string, string> = {}): Promise<string> {
  proc = runGateway([], { PORT: '0', LOG_FORMAT: 'json', UPSTREAM_URL: provider!.baseUrl, SUMMARIZER_MAX_INPUT_TOKENS: '500000', ...env });
  return listening(proc);
}

/** The chat request through OpenAI's SDK: its status, its x-gateway-compaction header, and the request id. */
async function chat(origin: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  const sdk = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'sk-client', maxRetries: 0, timeout: 15_000 });
  try {
    const { response } = await sdk.chat.completions.create(body as never, { headers }).withResponse();
    return { status: response.status, header: response.headers.get('x-gateway-compaction'), id: response.headers.get('x-request-id')! };
  } catch (err) {
    if (!(err instanceof OpenAI.APIError)) throw err;
    return { status: err.status, header: err.headers?.get('x-gateway-compaction') ?? null, id: err.headers?.get('x-request-id') ?? '' };
  }
}

/** The lines a request wrote at WARN or above (its access line is INFO). */
async function loudLines(id: string): Promise<any[]> {
  // The access line is the request's last: once it is out, the rescue's line is too.
  await expect
    .poll(() => jsonLines(proc!).some((l) => l.requestId === id && l.msg === 'request completed'), { timeout: 10_000 })
    .toBe(true);
  return jsonLines(proc!).filter((l) => l.requestId === id && l.level >= 40);
}

/** gateway_rescues_total by outcome, as the gateway's /metrics says it (its other series are 0). */
async function rescues(origin: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const counted: Record<string, number> = {};
  for (const [, outcome, n] of text.matchAll(/^gateway_rescues_total\{api="chat",outcome="(\w+)",upstream="default"\} (\d+)$/gm))
    if (Number(n) > 0) counted[outcome] = Number(n);
  return counted;
}

/** OpenAI's refusal stating a window (and the count it made) the test chooses. */
const refusal = (window: number, counted: number) => ({
  status: 400,
  json: {
    error: {
      message: `This model's maximum context length is ${window} tokens. However, your messages resulted in ${counted} tokens. Please reduce the length of the messages.`,
      type: 'invalid_request_error',
      param: 'messages',
      code: 'context_length_exceeded',
    },
  },
});

describe('one line per rescue, at its end', () => {
  it('saved: one WARN line ending in the replay status the client got', async () => {
    provider = await startStandIn({ limitBytes: 60_000, reply: () => ({ text: 'rescued' }) });
    const origin = await gateway();
    const res = await chat(origin, agentRequest(60));
    expect(res.status).toBe(200);
    expect(parseCompactionHeader(res.header)).toMatchObject({ outcome: 'replayed', 'replay-status': 200 });
    const lines = await loudLines(res.id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 40,
      compaction: { outcome: 'replayed', replayStatus: 200, replayResult: 'success', upstream: 'default' },
    });
    expect(lines[0].msg).toMatch(
      /^upstream rejected the chat request as overlong \(400 context_length, limit stated\): compacted \d+ items into \d+ .*, replayed once: the upstream answered 200$/,
    );
    expect(await rescues(origin)).toEqual({ replayed: 1 });
    // What the upstream saw: the gateway's header on the replay only, with what was known before sending it.
    const [first, replay] = provider.calls('chat');
    expect(first.headers['x-gateway-compaction']).toBeUndefined();
    expect(parseCompactionHeader(replay.headers['x-gateway-compaction'] as string)).toMatchObject({
      outcome: 'replayed',
      trigger: 'rejected',
      reason: 'context_length',
    });
    expect(replay.headers['x-gateway-compaction']).not.toMatch(/replay-status/);
  });

  it('an upstream whose real limit is below what the gateway compacts to: one ERROR line saying the replay got 400', async () => {
    // Its refusal states a window four times what it takes: the compacted replay is refused too.
    provider = await startStandIn({ limitBytes: 20_000 });
    provider.script(refusal(40_000, 45_000));
    const origin = await gateway();
    const res = await chat(origin, agentRequest(60));
    expect(res.status).toBe(400);
    expect(provider.calls('chat')).toHaveLength(2);
    expect(provider.verdicts('chat')).toEqual([expect.stringMatching(/maximum context length is 5000 tokens/)]);
    expect(parseCompactionHeader(res.header)).toMatchObject({ outcome: 'replay_failed', 'replay-status': 400 });
    const lines = await loudLines(res.id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 50,
      compaction: { outcome: 'replay_failed', replayStatus: 400, replayResult: 'still_overlong' },
    });
    expect(lines[0].msg).toMatch(/, replayed once: the upstream answered 400, overlong still, passed to the client$/);
    expect(await rescues(origin)).toEqual({ replay_failed: 1 });
  });

  it('nothing to shrink: one ERROR line, outcome not_shrunk', async () => {
    provider = await startStandIn({ limitBytes: 20_000 });
    const origin = await gateway();
    const res = await chat(origin, {
      model: 'm',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'x'.repeat(100_000) },
      ],
    });
    expect(res.status).toBe(400);
    expect(parseCompactionHeader(res.header)).toMatchObject({ outcome: 'not_shrunk' });
    const lines = await loudLines(res.id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, compaction: { outcome: 'not_shrunk' } });
    expect(lines[0].msg).toMatch(/: no useful compaction \(.*\); passing the upstream error through$/);
    expect(await rescues(origin)).toEqual({ not_shrunk: 1 });
  });

  it('shed (the rescue budget full): one ERROR line, outcome shed', async () => {
    provider = await startStandIn({ limitBytes: 60_000 });
    const origin = await gateway({ COMPACTION_RESCUE_BUDGET_BYTES: '1000', COMPACTION_RESCUE_WAIT_MS: '0' });
    const res = await chat(origin, agentRequest(60));
    expect(res.status).toBe(400);
    expect(provider.calls('chat')).toHaveLength(1);
    expect(parseCompactionHeader(res.header)).toMatchObject({ outcome: 'shed' });
    const lines = await loudLines(res.id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, compaction: { outcome: 'shed', budgetBytes: 1000 } });
    expect(await rescues(origin)).toEqual({ shed: 1 });
  });

  it('opted out by the client: one WARN line, outcome disabled', async () => {
    provider = await startStandIn({ limitBytes: 60_000 });
    const origin = await gateway();
    const res = await chat(origin, agentRequest(60), { 'x-gateway-compaction': 'off' });
    expect(res.status).toBe(400);
    expect(parseCompactionHeader(res.header)).toMatchObject({ outcome: 'disabled' });
    const lines = await loudLines(res.id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, compaction: { outcome: 'disabled' } });
    expect(await rescues(origin)).toEqual({ disabled: 1 });
  });
});
