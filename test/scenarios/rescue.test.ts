import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { sample } from '../helpers/hostile-child.js';
import { zstdCompress } from '../helpers/zstd.js';
import { freePort } from '../helpers/ports.js';
import { apiOf, startStandIn, type Api, type StandIn, type StandInOptions, type TooLong } from '../helpers/provider.js';
import { chatFixture } from './apis/chat.js';
import { CONTENT_TEXT, headerOf, readAll, type ApiFixture, type Body, type Turn } from './apis/fixture.js';
import { geminiFixture } from './apis/gemini.js';
import { messagesFixture } from './apis/messages.js';
import { responsesFixture } from './apis/responses.js';
import { total } from '../helpers/exposition.js';
import type { Received } from '../helpers/fake-upstream.js';

/*
 * The rescue, once per API: each row is an API's fixture (its requests, its SDK, its stream
 * events, what a valid replay of it is), each scenario a thing an agent's user would notice,
 * through real sockets, against the strict stand-in (the provider's own rules and errors). The
 * agent's request is TURNS tool rounds; the stand-in refuses a body past 70% of it. A new API is
 * one more row.
 */

const FIXTURES: ApiFixture[] = [chatFixture, responsesFixture, messagesFixture, geminiFixture];
const TURNS = 10;

let standIn: StandIn | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await standIn?.close();
  gateway = standIn = undefined;
});

/** Rejects after `ms`: every wait here is bounded. */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A response's stream read as text, each read bounded by `within`. */
function streamText(res: Response) {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const next = async (what: string) => {
    const { value, done } = await within(5_000, what, reader.read());
    if (!done) text += decoder.decode(value, { stream: true });
    return done;
  };
  return {
    get text() {
      return text;
    },
    /** Reads until `enough(text)`; the stream ending first is an error. */
    async until(enough: (text: string) => boolean, what: string): Promise<void> {
      while (!enough(text)) if (await next(what)) throw new Error(`stream ended early: ${text}`);
    },
    /** Reads to the end; rejects at a cut. */
    async rest(what: string): Promise<void> {
      while (!(await next(what)));
    },
  };
}

/** What the stand-in's model says to its n-th call: a sentence, then a call to read the next file. */
const said = (n: number) => `Let me read src/next${n}.ts.`;
const reply = (_api: Api, n: number) => ({
  text: said(n),
  call: { id: `read_next_${n}`, name: 'read_file', args: { path: `src/next${n}.ts` } },
});

/** The request with its instructions (kept byte for byte by any compaction) grown past `bytes`: nothing can make it fit. */
function withHugeInstructions(wire: unknown, bytes: number): unknown {
  const instructions = /^(You are a coding agent\.|Work in the repository at \/src\.)$/;
  let grown = false;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string' && !grown && instructions.test(v)) return ((grown = true), `${v} ${'x'.repeat(bytes)}`);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  const out = walk(wire);
  if (!grown) throw new Error('no instructions to grow');
  return out;
}

/** The conversation of a wire body, whichever API's. */
const itemsOf = (wire: Body): unknown[] => wire.messages ?? wire.input ?? wire.contents;

const isOverflow = (message: string | null) =>
  message !== null && /too long|context length|context window|exceeds the maximum|Too Large/.test(message);

describe.each(FIXTURES.map((f) => [f.api, f] as const))('%s', (_api, f) => {
  const body = f.request(TURNS);
  const limitBytes = Math.floor(Buffer.byteLength(JSON.stringify(f.wire(body, false))) * 0.7);

  async function start(
    tooLong: TooLong,
    config: Record<string, any> = {},
    answers: Pick<StandInOptions, 'summarizer'> = {},
  ): Promise<string> {
    standIn = await startStandIn({ limitBytes, tooLong, reply, ...answers });
    // With the defaults: window discovery on, as a deployed gateway runs.
    gateway = await startGateway({ ...config, upstream: { url: f.upstreamUrl(standIn), discoverWindows: true, ...config.upstream } });
    return gateway.origin;
  }

  /** The one rescue: a refused attempt, one replay the strict stand-in took, the client got its answer. */
  function expectRescued(turn: Turn, style: TooLong) {
    const calls = standIn!.calls(f.api);
    expect(calls).toHaveLength(2);
    const [rejected, replay] = calls;
    expect(rejected.body.length).toBeGreaterThan(limitBytes);
    const verdicts = standIn!.verdicts(f.api);
    expect(isOverflow(verdicts[0]), String(verdicts[0])).toBe(true);
    expect(verdicts[1]).toBeNull();
    expect(turn.status).toBe(200);
    expect(turn.header).toMatchObject({ outcome: 'replayed', trigger: 'rejected', reason: f.reject(style).reason });
    expect(turn.text).toBe(said(1));
    f.expectValidReplay(rejected, replay);
    expect(replay.body.length).toBeLessThanOrEqual(limitBytes);
    return { rejected, replay };
  }

  /** Masking the oldest tool outputs is enough for TURNS rounds: every message where it was, the oldest outputs one line each, nothing cut, no model asked. */
  function expectMasked(turn: Turn, { rejected, replay }: { rejected: Received; replay: Received }) {
    expect(turn.header).toMatchObject({ strategy: 'mask' });
    expect(turn.header!['messages-after']).toBe(turn.header!['messages-before']);
    expect(turn.header!.cut ?? 0).toBe(0);
    expect(itemsOf(replay.json)).toHaveLength(itemsOf(rejected.json).length);
    expect(replay.body.toString()).toContain('[tool output omitted by compaction-gateway: ');
    expect(replay.body.toString()).not.toContain('[compaction-gateway]');
    expect(standIn!.summarizerCalls()).toEqual([]);
  }

  it('400 with a stated window: replayed once, under the window it stated', async () => {
    const origin = await start('stated');
    const turn = await f.send(origin, body, { stream: false });
    expectMasked(turn, expectRescued(turn, 'stated'));
    if (f.reject('stated').statesWindow) expect(turn.header).toMatchObject({ limit: 'stated' });
  });

  it('413 page: a refusal without numbers is a size limit; the replay fits', async () => {
    const origin = await start('page');
    const turn = await f.send(origin, body, { stream: true });
    expectMasked(turn, expectRescued(turn, 'page'));
    expect(turn.header).toMatchObject({ reason: 'body_too_large' });
  });

  it('in-stream failure: the overflow inside a 200 stream is rescued; the client sees only the replay', async () => {
    const origin = await start('in_stream');
    const turn = await f.send(origin, body, { stream: true });
    expectMasked(turn, expectRescued(turn, 'in_stream'));
    // By plain fetch too: the refused attempt's events never reach the client.
    const again = await f.post(origin, JSON.stringify(f.wire(body, true)), { stream: true });
    const { text } = await readAll(again);
    expect(again.status).toBe(200);
    expect(text).toContain(said(2));
    expect(text).not.toContain(standIn!.verdicts(f.api)[0]!);
  });

  it('in-stream failure, by plain fetch: the bytes of the replay\u2019s stream, nothing of the refused attempt', async () => {
    const origin = await start('in_stream');
    const res = await f.post(origin, JSON.stringify(f.wire(body, true)), { stream: true });
    const { text } = await readAll(res);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-gateway-compaction')).toMatch(/^outcome=replayed, trigger=rejected, reason=context_length/);
    const calls = standIn!.calls(f.api);
    expect(calls).toHaveLength(2);
    expect(isOverflow(standIn!.verdicts(f.api)[0])).toBe(true);
    expect(text).toBe(standIn!.answerBytes(calls[1]).toString());
  });

  it('nothing to compact: an in-stream overflow is relayed byte for byte, not_shrunk', async () => {
    standIn = await startStandIn({ limitBytes: 100, tooLong: 'in_stream', reply });
    gateway = await startGateway({ upstream: { url: f.upstreamUrl(standIn) } });
    const res = await f.post(gateway.origin, JSON.stringify(f.wire(f.request(0), true)), { stream: true });
    const { text } = await readAll(res);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-gateway-compaction')).toMatch(/^outcome=not_shrunk\b/);
    expect(standIn.calls()).toHaveLength(1);
    expect(text).toBe(standIn.answerBytes(standIn.calls()[0]).toString());
    expect(text).toContain(JSON.stringify(standIn.verdicts(f.api)[0]).slice(1, -1));
  });

  describe('stream already started', () => {
    const bytes = () => JSON.stringify(f.wire(body, true));

    it('a failure after the first content is relayed as it came, never replayed', async () => {
      let clientSawContent!: () => void;
      const seen = new Promise<void>((resolve) => (clientSawContent = resolve));
      const origin = await start('stated');
      const events = [...f.preamble(), f.contentEvent(), f.failureEvent()];
      // The failure is sent only once the client holds the content: the gateway has committed.
      standIn!.script({ events, pause: { after: events.length - 1, until: within(5_000, 'the client to receive the content', seen) } });
      const res = await within(5_000, 'response headers', f.post(origin, bytes(), { stream: true }));
      expect(res.status).toBe(200);
      expect(res.headers.get('x-gateway-compaction')).toBeNull();
      const stream = streamText(res);
      await stream.until((text) => text.includes(CONTENT_TEXT), 'the content at the client');
      clientSawContent();
      await stream.rest('the rest of the stream');
      expect(stream.text).toBe(events.join(''));
      expect(standIn!.calls()).toHaveLength(1);
    });

    it('a stream cut after the first content is not replayed: the client sees the cut, the gateway serves on', async () => {
      let clientSawContent!: () => void;
      const seen = new Promise<void>((resolve) => (clientSawContent = resolve));
      const origin = await start('stated');
      const events = [...f.preamble(), f.contentEvent()];
      standIn!.script({
        events,
        pause: { after: events.length, until: within(5_000, 'the client to receive the content', seen) },
        end: 'reset',
      });
      const res = await within(5_000, 'response headers', f.post(origin, bytes(), { stream: true }));
      expect(res.status).toBe(200);
      const stream = streamText(res);
      await stream.until((text) => text.includes(CONTENT_TEXT), 'the content at the client');
      clientSawContent();
      // A clean end resolves; only the cut rejects.
      await expect(stream.rest('the cut')).rejects.toThrow(/terminated|other side closed|ECONNRESET|socket/i);
      expect(stream.text).toBe(events.join(''));
      expect(standIn!.calls()).toHaveLength(1);
      // The next request is served as usual, and rescued as usual; where the API lists its models'
      // windows (Gemini's models.get), the first request asked, and the next one is made to fit it.
      const turn = await f.send(origin, body, { stream: true });
      if (f.api === 'gemini') {
        expect(turn.header).toMatchObject({ outcome: 'compacted', trigger: 'window', limit: 'discovered' });
        expect(standIn!.calls()).toHaveLength(2);
      } else {
        expect(turn.header).toMatchObject({ outcome: 'replayed' });
        expect(standIn!.calls()).toHaveLength(3);
      }
    });

    it('through the SDK: the agent gets the content that was sent, and the failure as its SDK makes it', async () => {
      let sdkSawContent!: () => void;
      const content = new Promise<void>((resolve) => (sdkSawContent = resolve));
      const origin = await start('stated');
      const events = [...f.preamble(), f.contentEvent(), f.failureEvent()];
      standIn!.script({ events, pause: { after: events.length - 1, until: within(5_000, 'the SDK to hand over the content', content) } });
      const seen = await within(5_000, 'the SDK stream', f.sdkStream(origin, body, sdkSawContent));
      expect(seen.text).toBe(CONTENT_TEXT);
      expect(seen.failure).toMatch(f.sdkFailure);
      expect(standIn!.calls()).toHaveLength(1);
    });
  });

  describe('a preamble that never ends', () => {
    const idle = f.idleEvent(0, 0) === null;

    /** Streams the preamble and `extra` idle events, then waits for the client to have seen all of it. */
    async function held(config: Record<string, unknown>, extra: string[]): Promise<void> {
      let clientSawAll!: () => void;
      const seen = new Promise<void>((resolve) => (clientSawAll = resolve));
      const origin = await start('stated', config);
      const events = [...f.preamble(), ...extra, f.contentEvent()];
      standIn!.script({ events, pause: { after: events.length - 1, until: within(5_000, 'the client to receive the preamble', seen) } });
      const res = await within(5_000, 'response headers', f.post(origin, JSON.stringify(f.wire(body, true)), { stream: true }));
      expect(res.status).toBe(200);
      const stream = streamText(res);
      const before = events.slice(0, -1).join('');
      await stream.until((text) => text.length >= before.length, 'the preamble at the client');
      clientSawAll();
      await stream.rest('the rest');
      expect(stream.text).toBe(events.join(''));
      expect(standIn!.calls()).toHaveLength(1);
    }

    it.skipIf(idle)('past its size bound, it is relayed instead of being held', async () => {
      // The time bound far off: the bytes held are what gives.
      await held(
        { upstream: { preambleHoldMs: 60_000 } },
        Array.from({ length: 400 }, (_, i) => f.idleEvent(i, 200)!),
      );
    });

    it.skipIf(idle)('past upstream.preambleHoldMs, it is relayed: the client sees the stream start', async () => {
      await held({ upstream: { preambleHoldMs: 200 } }, [f.idleEvent(0, 0)!]);
    });
  });

  it('tool pairs intact: summarised, no call without its output nor output without its call, the strict provider agrees', async () => {
    // Masking off: the older rounds are cut and summarised, so the cut is between rounds.
    const origin = await start('stated', { compaction: { mask: false } });
    const turn = await f.send(origin, body, { stream: false });
    const { rejected, replay } = expectRescued(turn, 'stated');
    expect(turn.header).toMatchObject({ strategy: 'summarize' });
    expect(Number(turn.header!['messages-after'])).toBeLessThan(Number(turn.header!['messages-before']));
    expect(f.brokenPairs(rejected.json)).toEqual([]);
    expect(f.brokenPairs(replay.json)).toEqual([]);
    expect(standIn!.summarizerCalls().length).toBeGreaterThan(0);
    // The summarizer spoke the request's own API, with the request's own credentials.
    for (const summarizer of standIn!.summarizerCalls()) {
      expect(apiOf(summarizer.url)).toBe(f.api);
      for (const name of ['authorization', 'x-api-key', 'x-goog-api-key', 'anthropic-version'])
        expect(summarizer.headers[name], name).toBe(rejected.headers[name]);
    }
  });

  it('other fields unchanged: every field but the conversation, the URL and the agent\u2019s headers as sent', async () => {
    const origin = await start('stated');
    const turn = await f.send(origin, body, { stream: false, headers: { 'x-agent-session': 'session-42' } });
    const { rejected, replay } = expectRescued(turn, 'stated');
    expect(replay.url).toBe(rejected.url);
    for (const name of ['authorization', 'x-api-key', 'x-goog-api-key', 'anthropic-version', 'x-agent-session', 'user-agent'])
      expect(replay.headers[name], name).toBe(rejected.headers[name]);
    expect(replay.headers['x-agent-session']).toBe('session-42');
  });

  describe.each<[string, Pick<StandInOptions, 'summarizer'>, Record<string, unknown>]>([
    ['unreachable', {}, { url: 'dead' }],
    ['timeout', { summarizer: 'hang' }, { timeoutMs: 300 }],
    ['rejected', { summarizer: { status: 503, json: { error: { message: 'overloaded' } } } }, {}],
    ['bad_response', { summarizer: { status: 200, json: {} } }, {}],
  ])('failing summarizer (%s)', (kind, answers, summarizer) => {
    it('the fallback digest condenses, the replay is accepted', async () => {
      const url = summarizer.url === 'dead' ? { url: `http://127.0.0.1:${await freePort()}` } : {};
      const origin = await start(
        'stated',
        { summarizer: { maxInputTokens: 500_000, ...summarizer, ...url }, compaction: { mask: false } },
        answers,
      );
      const turn = await f.send(origin, body, { stream: true });
      const { replay } = expectRescued(turn, 'stated');
      expect(turn.header).toMatchObject({ strategy: 'fallback', 'summarizer-failure': kind });
      expect(replay.body.toString()).toContain('[compaction-gateway]');
      if (kind !== 'unreachable') expect(standIn!.summarizerCalls().length).toBeGreaterThan(0);
      const warned = gateway!.logLines().filter((line) => line.failure !== undefined);
      expect(warned).toEqual([
        expect.objectContaining({ level: 40, failure: kind, msg: expect.stringMatching(/using the deterministic digest$/) }),
      ]);
      const metrics = await (await fetch(`${origin}/metrics`)).text();
      expect(total(metrics, 'gateway_summarizer_failures_total', { kind, upstream: 'default' })).toBe(1);
      expect(metrics).toContain(`gateway_compactions_total{api="${f.api}",strategy="fallback",outcome="replayed",upstream="default"} 1`);
    });
  });

  it('compaction.strategy fallback: condensed without asking any model', async () => {
    const origin = await start('stated', { compaction: { strategy: 'fallback', mask: false } });
    const turn = await f.send(origin, body, { stream: false });
    expectRescued(turn, 'stated');
    expect(turn.header).toMatchObject({ strategy: 'fallback' });
    expect(standIn!.summarizerCalls()).toEqual([]);
  });

  it('nothing can be shrunk behind an edge 413 page: the client gets its API\u2019s own overflow error, so its agent compacts itself', async () => {
    const origin = await start('page');
    // Its newest item alone is larger than the limit: no compaction can make it fit.
    const raw = JSON.stringify(withHugeInstructions(f.wire(f.request(1), false), limitBytes));
    expect(raw.length).toBeGreaterThan(limitBytes);
    const res = await f.post(origin, raw, { stream: false });
    const header = headerOf(res.headers.get('x-gateway-compaction'));
    // Nothing to shrink (not_shrunk), or a replay cut as far as it goes and refused all the same (replay_failed).
    expect(header).toMatchObject({ reason: 'body_too_large', 'overflow-error': 'translated' });
    expect(['not_shrunk', 'replay_failed']).toContain(header!.outcome);
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toBe('application/json');
    const body = (await res.json()) as any;
    const words = {
      chat: /"code":"context_length_exceeded"/,
      responses: /"code":"context_length_exceeded"/,
      messages: /prompt is too long: \d+ tokens > \d+ maximum/,
      gemini: /exceeds the maximum number of tokens allowed/,
    }[f.api];
    expect(JSON.stringify(body)).toMatch(words);
    // The API's own error shape, as its SDK reads it.
    if (f.api === 'messages') expect(body).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    else if (f.api === 'gemini') expect(body).toMatchObject({ error: { code: 400, status: 'INVALID_ARGUMENT' } });
    else expect(body).toMatchObject({ error: { type: 'invalid_request_error', code: 'context_length_exceeded' } });
    expect(standIn!.calls().length).toBe(header!.outcome === 'not_shrunk' ? 1 : 2);
  });

  it('compaction.translateOverflow false: the edge\u2019s 413 page as it came', async () => {
    const origin = await start('page', { compaction: { translateOverflow: false } });
    const raw = JSON.stringify(withHugeInstructions(f.wire(f.request(1), false), limitBytes));
    const res = await f.post(origin, raw, { stream: false });
    expect(res.status).toBe(413);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(standIn!.answerBytes(standIn!.calls().at(-1)!));
    expect(['not_shrunk', 'replay_failed']).toContain(headerOf(res.headers.get('x-gateway-compaction'))!.outcome);
    expect(headerOf(res.headers.get('x-gateway-compaction'))).not.toHaveProperty('overflow-error');
  });

  it('compaction.maxReplays 0: the rescue is off, the refusal as it came', async () => {
    const origin = await start('page', { compaction: { maxReplays: 0 } });
    const turn = await f.send(origin, body, { stream: false });
    expect(turn.status).toBe(413);
    expect(standIn!.calls()).toHaveLength(1);
    expect(standIn!.summarizerCalls()).toEqual([]);
    const res = await f.post(origin, standIn!.calls()[0].body, { stream: false });
    expect(res.status).toBe(413);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(standIn!.answerBytes(standIn!.calls()[1]));
    expect(res.headers.get('x-gateway-compaction')).toMatch(/^outcome=disabled\b/);
  });

  it('opt-out (x-gateway-compaction: off): the provider\u2019s own refusal, byte for byte, nothing condensed', async () => {
    const origin = await start('stated');
    const off = { 'x-gateway-compaction': 'off' };
    const turn = await f.send(origin, body, { stream: false, headers: off });
    expect(turn.status).toBe(400);
    expect(turn.error).toBe(standIn!.verdicts(f.api)[0]);
    expect(standIn!.calls()).toHaveLength(1);
    const [refused] = standIn!.calls();
    const through = await f.post(origin, refused.body, { stream: false, headers: off });
    expect(through.status).toBe(400);
    expect(Buffer.from(await through.arrayBuffer())).toEqual(standIn!.answerBytes(standIn!.calls()[1]));
    expect(through.headers.get('content-type')).toBe(standIn!.answerHeaders(standIn!.calls()[1])['content-type']);
    expect(standIn!.answerBytes(standIn!.calls()[1]).toString()).toContain(JSON.stringify(standIn!.verdicts(f.api)[1]).slice(1, -1));
    expect(headerOf(through.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'disabled', reason: 'context_length' });
    expect(standIn!.calls()).toHaveLength(2);
    // The opt-out itself is never forwarded upstream.
    for (const call of standIn!.calls()) expect(call.headers['x-gateway-compaction']).toBeUndefined();
    expect(standIn!.summarizerCalls()).toEqual([]);
  });

  it.each([
    ['zstd', zstdCompress],
    ['gzip', (b: Buffer) => gzipSync(b)],
    ['br', (b: Buffer) => brotliCompressSync(b)],
  ] as const)(
    'a %s body (as Codex and Claude Code send large ones) is decoded for the rescue; the replay goes as plain JSON',
    async (coding, compress) => {
      const origin = await start('stated');
      const raw = Buffer.from(JSON.stringify(f.wire(body, false)));
      const res = await f.post(origin, compress(raw), { stream: false, headers: { 'content-encoding': coding } });
      expect(res.status).toBe(200);
      expect(headerOf(res.headers.get('x-gateway-compaction'))).toMatchObject({
        outcome: 'replayed',
        reason: 'context_length',
        'messages-before': expect.any(Number),
      });
      const [refused, replay] = standIn!.calls();
      expect(standIn!.calls()).toHaveLength(2);
      // The client's bytes went as they came; the replay is the gateway's own JSON, no coding.
      expect(refused.headers['content-encoding']).toBe(coding);
      expect(replay.headers['content-encoding']).toBeUndefined();
      expect(replay.body.length).toBeLessThanOrEqual(limitBytes);
      expect(f.brokenPairs(replay.json)).toEqual([]);
      expect(standIn!.verdicts(f.api)).toEqual([expect.stringMatching(/./), null]);
    },
  );

  it('a declared window: the request goes made to fit it, and the strict provider refuses nothing', async () => {
    const window = Math.floor(limitBytes / 4);
    const origin = await start('stated', { upstream: { windows: [{ model: '*', tokens: window }], discoverWindows: false } });
    const turn = await f.send(origin, body, { stream: false });
    expect(turn.status).toBe(200);
    expect(turn.text).toBe(said(1));
    expect(turn.header).toMatchObject({ outcome: 'compacted', trigger: 'window', reason: 'context_length', limit: 'declared', window });
    // One model call, never refused: the window was known before sending.
    expect(standIn!.calls()).toHaveLength(1);
    expect(standIn!.verdicts(f.api)).toEqual([null]);
    const [sent] = standIn!.calls();
    expect(sent.body.length).toBeLessThanOrEqual(limitBytes);
    expect(f.brokenPairs(sent.json)).toEqual([]);
    // Nothing but the model's own calls went upstream: a declared window is asked of no one.
    expect(standIn!.received.filter((r) => r.method !== 'POST')).toEqual([]);
    const metrics = await (await fetch(`${origin}/metrics`)).text();
    expect(sample(metrics, 'gateway_window_compactions_total', { api: f.api, upstream: 'default', source: 'declared' })).toBe(1);
    expect(sample(metrics, 'gateway_overlong_rejections_total', { api: f.api, reason: 'context_length', upstream: 'default' })).toBe(0);
  });

  it('a declared window the request fits: sent as it came, byte for byte', async () => {
    const origin = await start('stated', { upstream: { windows: [{ model: '*', tokens: 10_000_000 }], discoverWindows: false } });
    const raw = JSON.stringify(f.wire(f.request(2), false));
    const res = await f.post(origin, raw, { stream: false });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-gateway-compaction')).toBeNull();
    expect(standIn!.calls()).toHaveLength(1);
    expect(standIn!.calls()[0].body.toString()).toBe(raw);
  });

  it('later turn from memory: compacted ahead in one call, the strict provider takes it', async () => {
    const origin = await start('stated');
    let request: Body = body;
    let turn = await f.send(origin, request, { stream: false });
    expectRescued(turn, 'stated');
    for (let t = 2; t <= 3; t++) {
      const before = standIn!.calls().length;
      request = f.next(request, turn);
      turn = await f.send(origin, request, { stream: t === 3 });
      expect(turn.status).toBe(200);
      expect(turn.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive', strategy: 'mask' });
      expect(standIn!.calls().length - before).toBe(1);
      expect(standIn!.verdicts(f.api).at(-1)).toBeNull();
      expect(turn.text).toBe(said(t));
      const sent = standIn!.calls().at(-1)!;
      expect(sent.body.length).toBeLessThanOrEqual(limitBytes);
      expect(f.brokenPairs(sent.json)).toEqual([]);
    }
  });
});
