import { readFileSync } from 'node:fs';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import type { ConfigInput } from '../../src/config/schema.js';
import { fileText } from '../helpers/claude-request.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import {
  carries,
  credentialsOf,
  startAnthropicProvider,
  startLocal,
  startOpenAi,
  type Call,
  type Provider,
  type ProviderName,
} from '../helpers/multi-upstream.js';
import { toolTurnsBody } from '../helpers/rescue.js';
import { sessionTurns } from '../helpers/sessions.js';

/*
 * One gateway, three providers: Claude Code, Codex and pi (their recorded sessions, 13 requests
 * each) and the official OpenAI and Anthropic SDKs, all at once, each by its own base URL. Claude
 * Code names its upstream by prefix (/anthropic), Codex by prefix (/openai/v1), pi by its model
 * (qwen*, routed to the local model), the SDKs by API (messages to anthropic) and by default
 * (openai); one more chat call names a qwen model under /openai/v1, where the prefix beats the
 * model route. Every provider refuses bodies past a limit a few turns into its session, so every
 * session overflows against its own provider and is rescued there. What each provider received
 * is the proof: its own credential and nobody else's, only its own API, every turn answered, and
 * the summaries in its compacted requests written by the upstream that should write them.
 */

const LIMITS: Record<ProviderName, number> = { openai: 110_000, anthropic: 130_000, local: 110_000 };
const GATEWAY_KEY = 'gw-key-multi-7c1e';
const OPENAI_KEY = 'sk-openai-gw';
const ANTHROPIC_KEY = 'sk-ant-gw';

type Client = 'claude' | 'codex' | 'pi' | 'openaiSdk' | 'anthropicSdk';
const CLIENT_KEYS: Record<Client, string> = {
  claude: 'sk-client-claude-code',
  codex: 'sk-client-codex',
  pi: 'sk-client-pi',
  openaiSdk: 'sk-client-openai-sdk',
  anthropicSdk: 'sk-client-anthropic-sdk',
};
const ALL_KEYS = [GATEWAY_KEY, OPENAI_KEY, ANTHROPIC_KEY, ...Object.values(CLIENT_KEYS)];

const fixtures = new URL('../fixtures/agent-sessions/', import.meta.url);
const recorded = (agent: string) => JSON.parse(readFileSync(new URL(`${agent}/headers.json`, fixtures), 'utf8'));
const CLAUDE = recorded('claude');
const CODEX = recorded('codex');
/** A session's 13 request bodies, byte for byte as its agent sent them. */
const bodiesOf = (agent: string) =>
  Array.from({ length: 13 }, (_, i) => readFileSync(new URL(`${agent}/${String(i + 1).padStart(2, '0')}-main.json`, fixtures)));
const claudeTurns = bodiesOf('claude');
const CLAUDE_MODEL = JSON.parse(claudeTurns[0].toString('utf8')).model as string;
const codexTurns = bodiesOf('codex');
// pi as pointed at a local Qwen: the same session, its model renamed, so the model route picks `local`.
const piTurns = sessionTurns('pi').map((t) => Buffer.from(JSON.stringify({ ...t, model: 'qwen3-coder' })));

/** A recorded request's headers minus what belongs to its own connection. */
function replayable(headers: Record<string, string>): Record<string, string> {
  const { host: _h, 'content-length': _l, connection: _c, ...rest } = headers;
  return rest;
}

interface Variant {
  name: string;
  /** Gateway keys on: every client presents GATEWAY_KEY, and the upstreams hold their own keys. */
  gatewayKeys: boolean;
  /** Who writes local's summaries. */
  localSummarizer: ProviderName;
}

const VARIANTS: Variant[] = [
  { name: 'gateway keys on, each upstream holding its own key, local summarised by openai', gatewayKeys: true, localSummarizer: 'openai' },
  { name: 'no gateway keys, each client bringing its own key, local summarising itself', gatewayKeys: false, localSummarizer: 'local' },
];

function configOf(v: Variant, p: Record<ProviderName, Provider>): ConfigInput {
  return {
    upstreams: {
      openai: { url: p.openai.baseUrl, ...(v.gatewayKeys ? { apiKey: OPENAI_KEY } : {}) },
      anthropic: { url: p.anthropic.baseUrl, apis: ['messages'], ...(v.gatewayKeys ? { apiKey: ANTHROPIC_KEY } : {}) },
      local: {
        url: p.local.baseUrl,
        apis: ['chat'],
        ...(v.localSummarizer === 'openai' ? { summarizer: { upstream: 'openai', model: 'gpt-4.1-mini' } } : {}),
      },
    },
    defaultUpstream: 'openai',
    routes: [
      { api: 'messages', upstream: 'anthropic' },
      { model: 'qwen*', upstream: 'local' },
    ],
    ...(v.gatewayKeys ? { auth: { keys: [GATEWAY_KEY] } } : {}),
    // Summaries only (no masking), so every rescue calls a summarizer and its credentials can be checked.
    compaction: { mask: false },
  };
}

/** The client a provider's request came from (summarizer calls: the client whose rescue made them). */
function clientOf(provider: ProviderName, call: Call): Client {
  if (provider === 'local') return 'pi';
  if (provider === 'anthropic') return call.received.json?.model === CLAUDE_MODEL ? 'claude' : 'anthropicSdk';
  if (call.received.url.startsWith('/v1/responses')) return 'codex';
  return call.received.json?.model === 'gpt-4.1-mini' ? 'pi' : 'openaiSdk';
}

/** The one credential a provider may have seen on a request, as `header: value`, or none. */
function expectedCredential(v: Variant, provider: ProviderName, call: Call): string[] {
  if (v.gatewayKeys)
    return { openai: [`authorization: Bearer ${OPENAI_KEY}`], anthropic: [`x-api-key: ${ANTHROPIC_KEY}`], local: [] }[provider];
  const client = clientOf(provider, call);
  // Claude Code sends its key as x-api-key; the SDKs (Anthropic's too) and the others as a Bearer token.
  return [client === 'claude' ? `x-api-key: ${CLIENT_KEYS[client]}` : `authorization: Bearer ${CLIENT_KEYS[client]}`];
}

interface Turn {
  turn: number;
  bytes: number;
  status: number;
  header: string | null;
  finished: boolean;
}

/** Sends a session's requests one after another, as its agent does, reading each answer to its end. */
async function replay(url: string, headers: Record<string, string>, bodies: Buffer[], lastEvent: string): Promise<Turn[]> {
  const turns: Turn[] = [];
  for (const [i, body] of bodies.entries()) {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    turns.push({
      turn: i + 1,
      bytes: body.length,
      status: res.status,
      header: res.headers.get('x-gateway-compaction'),
      finished: text.includes(lastEvent),
    });
  }
  return turns;
}

const PREFIX_WINS = 'By prefix: served by openai whatever the model.';

/** An OpenAI chat conversation of 14 file reads, ~140 KB: over openai's limit. */
const sdkChat = toolTurnsBody(14, (t) => fileText(t, 10_000), { model: 'gpt-x' });

/** A Messages conversation of 14 file reads, ~140 KB: over anthropic's limit. */
function sdkMessages(): Anthropic.MessageCreateParamsNonStreaming {
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Review every file under src/ one by one.' }];
  for (let k = 1; k <= 14; k++) {
    messages.push({
      role: 'assistant',
      content: [
        { type: 'text', text: `Reading src/f${k}.ts.` },
        { type: 'tool_use', id: `toolu_${k}`, name: 'Read', input: { file_path: `/src/f${k}.ts` } },
      ],
    });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${k}`, content: fileText(k, 10_000) }] });
  }
  return { model: 'claude-sonnet-x', max_tokens: 1024, messages };
}

/** Promise.all that waits for every client before it fails, so none is left running against a closing gateway. */
async function settled<T extends readonly unknown[]>(work: T): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.allSettled(work);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as never;
}

let providers: Record<ProviderName, Provider> | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await Promise.all(Object.values(providers ?? {}).map((p) => p.close()));
  gateway = undefined;
  providers = undefined;
});

async function setup(v: Variant): Promise<{ p: Record<ProviderName, Provider>; gw: TestGateway }> {
  const [openai, anthropic, local] = await Promise.all([
    startOpenAi({ limitBytes: LIMITS.openai, keys: v.gatewayKeys ? [OPENAI_KEY] : [CLIENT_KEYS.codex, CLIENT_KEYS.openaiSdk] }),
    startAnthropicProvider({
      limitBytes: LIMITS.anthropic,
      keys: v.gatewayKeys ? [ANTHROPIC_KEY] : [CLIENT_KEYS.claude, CLIENT_KEYS.anthropicSdk],
    }),
    // A local vLLM without --api-key takes any credential or none; what it got is asserted below.
    startLocal({ limitBytes: LIMITS.local }),
  ]);
  providers = { openai, anthropic, local };
  gateway = await startGateway(configOf(v, providers));
  return { p: providers, gw: gateway };
}

const keyOf = (v: Variant, client: Client) => (v.gatewayKeys ? GATEWAY_KEY : CLIENT_KEYS[client]);

describe.each(VARIANTS)('one gateway, three upstreams, five clients at once: $name', (v) => {
  it('routes each to its own provider, rescues each overflow there, and no provider sees another credential or API', async () => {
    const { p, gw } = await setup(v);
    const openaiSdk = new OpenAI({ baseURL: `${gw.origin}/v1`, apiKey: keyOf(v, 'openaiSdk'), maxRetries: 0 });
    // The same client by openai's prefix, with a model the qwen* route would send to local: the prefix wins.
    const openaiByPrefix = new OpenAI({ baseURL: `${gw.origin}/openai/v1`, apiKey: keyOf(v, 'openaiSdk'), maxRetries: 0 });
    const anthropicSdk = new Anthropic({ baseURL: gw.origin, apiKey: keyOf(v, 'anthropicSdk'), maxRetries: 0 });

    const [claude, codex, pi, chat, messages, byPrefix] = await settled([
      replay(
        `${gw.origin}/anthropic${CLAUDE.path}`,
        { ...replayable(CLAUDE.headers), 'x-api-key': keyOf(v, 'claude') },
        claudeTurns,
        'event: message_stop',
      ),
      replay(
        `${gw.origin}/openai/v1/responses`,
        { ...replayable(CODEX.headers), authorization: `Bearer ${keyOf(v, 'codex')}` },
        codexTurns,
        'event: response.completed',
      ),
      replay(`${gw.baseUrl}/chat/completions`, { authorization: `Bearer ${keyOf(v, 'pi')}` }, piTurns, 'data: [DONE]'),
      openaiSdk.chat.completions.create(sdkChat as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse(),
      anthropicSdk.messages.create(sdkMessages()).withResponse(),
      openaiByPrefix.chat.completions.create({ model: 'qwen3-coder', messages: [{ role: 'user', content: PREFIX_WINS }] }),
    ] as const);

    // Every turn of every session answered to its end; each session overflowed its provider on
    // several turns, and each of those says the gateway rescued it.
    for (const [session, turns, limit] of [
      ['claude', claude, LIMITS.anthropic],
      ['codex', codex, LIMITS.openai],
      ['pi', pi, LIMITS.local],
    ] as const) {
      expect(
        turns.map((t) => [t.turn, t.status, t.finished]),
        session,
      ).toEqual(turns.map((_, i) => [i + 1, 200, true]));
      const over = turns.filter((t) => t.bytes > limit);
      expect(over.length, `${session}: turns over its provider's limit`).toBeGreaterThanOrEqual(4);
      for (const t of over) expect(t.header, `${session} turn ${t.turn}`).toMatch(/(^|, )outcome=(replayed|compacted)(,|$)/);
    }
    expect(chat.data.choices[0].message.content).toBe('rescued answer');
    expect(chat.response.headers.get('x-gateway-compaction')).toMatch(/outcome=replayed/);
    expect(messages.data.content.at(-1)).toEqual({ type: 'text', text: 'next step' });
    expect(messages.response.headers.get('x-gateway-compaction')).toMatch(/outcome=replayed/);
    expect(byPrefix.choices[0].message.content).toBe('rescued answer');
    const heard = (name: ProviderName) => p[name].calls().filter((c) => c.received.body.includes(PREFIX_WINS)).length;
    expect([heard('openai'), heard('local')], 'the qwen3-coder request by /openai/v1: openai heard it, local did not').toEqual([1, 0]);

    // What each provider received: only its own API, never a wrong key or a wrong path.
    const paths: Record<ProviderName, RegExp> = {
      openai: /^\/v1\/(responses|chat\/completions)$/,
      anthropic: /^\/v1\/messages(\?beta=true)?$/,
      local: /^\/v1\/chat\/completions$/,
    };
    for (const name of ['openai', 'anthropic', 'local'] as const) {
      const calls = p[name].calls();
      expect(calls.length, name).toBeGreaterThan(0);
      for (const [i, call] of calls.entries()) {
        const what = `${name} call ${i} (${call.received.url}, ${call.summarizer ? 'summarizer' : clientOf(name, call)})`;
        expect(call.received.url, what).toMatch(paths[name]);
        expect(credentialsOf(call.received), what).toEqual(expectedCredential(v, name, call));
        const own = expectedCredential(v, name, call).map((c) => c.replace(/^.*: (Bearer )?/, ''));
        for (const key of ALL_KEYS.filter((k) => !own.includes(k)))
          expect(carries(call.received, key), `${what} carries ${key}`).toBe(false);
        // Answered, or refused for its size only (its provider's own 400 or nginx's 413): never 401 or 404.
        expect([200, 400, 413], `${what}: ${call.status}`).toContain(call.status);
        if (call.status !== 200) expect(call.received.body.length, `${what} refused`).toBeGreaterThan(LIMITS[name]);
      }
    }

    // Each overflow was refused by its own provider, then rescued there.
    const refused = (name: ProviderName, client: Client) =>
      p[name].calls().filter((c) => !c.summarizer && c.status !== 200 && clientOf(name, c) === client).length;
    expect(refused('anthropic', 'claude')).toBeGreaterThanOrEqual(1);
    expect(refused('anthropic', 'anthropicSdk')).toBe(1);
    expect(refused('openai', 'codex')).toBeGreaterThanOrEqual(1);
    expect(refused('openai', 'openaiSdk')).toBe(1);
    expect(refused('local', 'pi')).toBeGreaterThanOrEqual(1);

    // Each summary was written by the upstream that should write it, and reached its compacted requests.
    const summarizers = (name: ProviderName) => p[name].calls().filter((c) => c.summarizer);
    const signed = (name: ProviderName, by: ProviderName, client: Client) =>
      p[name]
        .calls()
        .filter((c) => !c.summarizer && c.status === 200 && clientOf(name, c) === client && c.received.body.includes(`by ${by} of`)).length;
    expect(signed('anthropic', 'anthropic', 'claude'), 'Claude Code turns carrying an Anthropic summary').toBeGreaterThanOrEqual(
      claude.filter((t) => t.bytes > LIMITS.anthropic).length,
    );
    expect(signed('openai', 'openai', 'codex'), 'Codex turns carrying an OpenAI summary').toBeGreaterThanOrEqual(
      codex.filter((t) => t.bytes > LIMITS.openai).length,
    );
    expect(signed('local', v.localSummarizer, 'pi'), `pi turns carrying a summary by ${v.localSummarizer}`).toBeGreaterThanOrEqual(
      pi.filter((t) => t.bytes > LIMITS.local).length,
    );
    expect(signed('anthropic', 'anthropic', 'anthropicSdk')).toBe(1);
    expect(signed('openai', 'openai', 'openaiSdk')).toBe(1);
    for (const name of ['openai', 'anthropic', 'local'] as const) {
      const foreign = (['openai', 'anthropic', 'local'] as const).filter(
        (by) => by !== name && !(name === 'local' && by === v.localSummarizer),
      );
      for (const by of foreign)
        expect(p[name].calls().filter((c) => c.received.body.includes(`by ${by} of`)).length, `${name} carrying a summary by ${by}`).toBe(
          0,
        );
    }
    expect(summarizers('anthropic').every((c) => c.received.url.startsWith('/v1/messages'))).toBe(true);
    const piSummaries = summarizers(v.localSummarizer).filter((c) => clientOf(v.localSummarizer, c) === 'pi');
    expect(piSummaries.length, "pi's summaries").toBeGreaterThanOrEqual(1);
    if (v.localSummarizer === 'openai') {
      // local never summarises: its summaries come from openai, on its own key, at the model configured.
      expect(summarizers('local')).toEqual([]);
      for (const c of piSummaries) {
        expect(c.received.url).toBe('/v1/chat/completions');
        expect(c.received.json.model).toBe('gpt-4.1-mini');
        expect(credentialsOf(c.received)).toEqual([`authorization: Bearer ${OPENAI_KEY}`]);
      }
    }

    // Nor does any key reach the log.
    for (const key of ALL_KEYS) expect(gw.logText()).not.toContain(key);
  }, 60_000);
});

describe('an upstream named by prefix that does not serve the API', () => {
  it("answers /local/v1/messages with a 404 in Anthropic's error shape naming a base URL that serves it; the SDK raises NotFoundError", async () => {
    const { p, gw } = await setup(VARIANTS[0]);
    const res = await fetch(`${gw.origin}/local/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': GATEWAY_KEY, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'qwen3-coder', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const body = await res.json();
    expect(res.status).toBe(404);
    expect(body).toMatchObject({
      type: 'error',
      error: { type: 'not_found_error', code: 'no_upstream', message: expect.stringContaining('/anthropic/v1') },
    });

    const sdk = new Anthropic({ baseURL: `${gw.origin}/local`, apiKey: GATEWAY_KEY, maxRetries: 0 });
    const err = await sdk.messages
      .create({ model: 'qwen3-coder', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    expect((err as InstanceType<typeof Anthropic.NotFoundError>).message).toContain('/anthropic/v1');
    // Refused at the gateway: no provider heard of it.
    for (const provider of Object.values(p)) expect(provider.calls()).toEqual([]);
  });
});
