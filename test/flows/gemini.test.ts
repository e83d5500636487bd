import {
  FunctionCallingConfigMode,
  GoogleGenAI,
  HarmBlockThreshold,
  HarmCategory,
  ThinkingLevel,
  type GenerateContentConfig,
} from '@google/genai';
import { afterEach, describe, expect, it } from 'vitest';
import type { Received } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { MESSAGES, tokensOf, type StrictGemini, type StrictGeminiReject } from '../helpers/strict-gemini.js';
import { expectValidGeminiReplay, geminiFixture } from '../scenarios/apis/gemini.js';
import { total } from '../helpers/exposition.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * A Gemini CLI session (the API's row of the scenario table is test/scenarios/apis/gemini.ts; here,
 * the session with signed calls): the official @google/genai SDK pointed at the gateway
 * as Gemini CLI is (its base URL the gateway's origin), against the strict Gemini stand-in, which
 * refuses a body past LIMIT in each of the ways the API and its edge do and checks the newest model
 * turn's thought signatures and every function response's pairing. The agent keeps its history as
 * Gemini CLI does: the model parts exactly as they came (thoughtSignature beside the call), then a
 * functionResponse per call. The 8th request is the first over the limit.
 */

const MODEL = 'gemini-3.1-pro-preview';
const API_KEY = 'AIza-sdk-test-key';
const FILE_BYTES = 6_000;
const LIMIT = 42_000; // the 7th request is about 39 KB, the 8th 46 KB
const FIRST_OVER = 8;

let standIn: StrictGemini | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await standIn?.close();
  gateway = standIn = undefined;
});

const TASK = { role: 'user', parts: [{ text: 'Review every TypeScript file under src/ one by one.' }] };
const file = (n: number) =>
  `// src/module${n}.ts\n${`export const value${n} = ${n}; // a line of the file\n`.repeat(Math.ceil(FILE_BYTES / 44))}`.slice(
    0,
    FILE_BYTES,
  );

/** Every field of the request besides contents, as the SDK sends them, and one it does not know. */
const CONFIG = {
  systemInstruction: 'You are a coding agent.',
  tools: [
    {
      functionDeclarations: [
        {
          name: 'read_file',
          description: 'Read a file',
          parametersJsonSchema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] },
        },
      ],
    },
  ],
  toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.AUTO } },
  safetySettings: [{ category: HarmCategory.HARM_CATEGORY_DANGEROUS_CONTENT, threshold: HarmBlockThreshold.BLOCK_ONLY_HIGH }],
  temperature: 0.2,
  maxOutputTokens: 4_000,
  thinkingConfig: { includeThoughts: true, thinkingLevel: ThinkingLevel.HIGH },
} satisfies GenerateContentConfig;
const UNKNOWN = { futureField: { kept: ['as', 'sent'] } };
const OTHER_FIELDS = ['systemInstruction', 'safetySettings', 'tools', 'toolConfig', 'generationConfig', 'futureField'];

interface Turn {
  status: number;
  header: Record<string, string | number> | null;
  /** The model parts the agent got (its chunks' parts, merged), and the chunks' count. */
  parts: any[];
  chunks: number;
}

/** A Gemini CLI-like agent: the whole history every turn; each answer asks to read one more file. */
class Agent {
  readonly contents: any[] = [TASK];
  constructor(
    private readonly stream: boolean,
    private readonly headers: Record<string, string> = {},
  ) {}

  /** One turn through the SDK at `baseUrl`: the model's parts appended as they came, then the file it asked for. */
  async turn(baseUrl: string, headers: Record<string, string> = {}): Promise<Turn> {
    const ai = new GoogleGenAI({ apiKey: API_KEY, httpOptions: { baseUrl } });
    const config = { ...CONFIG, httpOptions: { headers: { ...this.headers, ...headers }, extraBody: UNKNOWN } };
    const params = { model: MODEL, contents: this.contents, config };
    let parts: any[] = [];
    let chunks = 0;
    let raw: Record<string, string> | undefined;
    if (this.stream) {
      for await (const chunk of await ai.models.generateContentStream(params)) {
        chunks++;
        raw = chunk.sdkHttpResponse?.headers;
        parts.push(...(chunk.candidates?.[0]?.content?.parts ?? []));
      }
    } else {
      const answer = await ai.models.generateContent(params);
      chunks = 1;
      raw = answer.sdkHttpResponse?.headers;
      parts = answer.candidates?.[0]?.content?.parts ?? [];
    }
    this.answered(parts);
    const header = raw?.['x-gateway-compaction'];
    return { status: 200, header: header ? parseCompactionHeader(header) : null, parts, chunks };
  }

  /** One turn by plain fetch, the key as `?key=` and no x-goog-api-key, the body as the SDK writes it. */
  async turnWithQueryKey(origin: string, key: string): Promise<Turn> {
    const res = await fetch(`${origin}/v1beta/models/${MODEL}:generateContent?key=${key}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...this.headers },
      body: JSON.stringify(this.body()),
    });
    const answer: any = await res.json();
    const parts = answer.candidates?.[0]?.content?.parts ?? [];
    if (res.status === 200) this.answered(parts);
    const header = res.headers.get('x-gateway-compaction');
    return { status: res.status, header: header ? parseCompactionHeader(header) : null, parts, chunks: 1 };
  }

  /** The body the SDK sends for the next turn (what a Gemini CLI request looks like). */
  body() {
    const { systemInstruction, tools, toolConfig, safetySettings, ...generationConfig } = CONFIG;
    return {
      contents: this.contents,
      systemInstruction: { parts: [{ text: systemInstruction }], role: 'user' },
      safetySettings,
      tools,
      toolConfig,
      generationConfig,
      ...UNKNOWN,
    };
  }

  private answered(parts: any[]): void {
    this.contents.push({ role: 'model', parts });
    const calls = parts.filter((p) => p.functionCall).map((p) => p.functionCall);
    if (calls.length === 0) return;
    this.contents.push({
      role: 'user',
      parts: calls.map(({ id, name }) => ({ functionResponse: { id, name, response: { output: file(this.contents.length) } } })),
    });
  }
}

async function start(style: StrictGeminiReject, config: Record<string, unknown> = {}, apiKey?: string): Promise<TestGateway> {
  let reads = 0;
  standIn = await startStandIn({
    provider: 'gemini',
    limitBytes: LIMIT,
    style,
    reply: () => {
      const n = ++reads;
      return {
        text: `Let me read src/module${n}.ts next.`,
        functionCall: { id: `read_file_${n}`, name: 'read_file', args: { file_path: `src/module${n}.ts` } },
      };
    },
  });
  gateway = await startGateway({ upstream: { url: standIn.origin, ...(apiKey ? { apiKey } : {}) }, ...config });
  return gateway;
}

/** Turns until the first one over the limit, all through `origin`: the last is the rescued one. */
async function untilOverflow(agent: Agent, origin: string): Promise<Turn[]> {
  const turns: Turn[] = [];
  for (let t = 1; t <= FIRST_OVER; t++) turns.push(await agent.turn(origin));
  return turns;
}

const isOverflow = (message: string | null) =>
  message !== null &&
  (message === '413 Request Entity Too Large' ||
    /^The input token count \(\d+\) exceeds the maximum number of tokens allowed \(\d+\)\.$/.test(message));
const newestModel = (contents: any[]) => contents.findLast((c) => c.role === 'model');

/** Every functionResponse right after the model turn that issued its call, and every call answered there. */
function expectPairsIntact(contents: any[]): void {
  expect(geminiFixture.brokenPairs({ contents })).toEqual([]);
}

/** The table's Gemini replay check, and the fields the SDK sends: each of them, in order. */
function expectValidReplay(rejected: Received, replay: Received): void {
  expectValidGeminiReplay(rejected, replay);
  // The newest model turn asked for a file: its call carries the signature the replay must keep.
  expect(newestModel(rejected.json.contents).parts.find((p: any) => p.functionCall)?.thoughtSignature).toEqual(expect.any(String));
  const { contents: _a, ...fieldsBefore } = rejected.json;
  expect(Object.keys(fieldsBefore)).toEqual(OTHER_FIELDS);
}

/** The model parts the stand-in answered the turn's last call with, as the agent got them. */
const lastIssued = () => standIn!.issued().at(-1)!.parts;

/*
 * Each way Gemini says "too long" (its 400, the edge's 413, the error in a 200 stream), the failing
 * summarizer and the opt-out are rows of the scenario table (test/scenarios/rescue.test.ts); here,
 * the rescue of a session whose every call is signed, as Gemini 3 signs them.
 */
describe('a signed session, streaming, refused with its stated window', () => {
  it('rescued once: the replay fits, its pairs intact, every other field and the newest signature as sent; later turns compacted ahead', async () => {
    const origin = (await start('invalid_argument')).origin;
    const agent = new Agent(true);
    const turns = await untilOverflow(agent, origin);
    expect(turns.slice(0, FIRST_OVER - 1).map((t) => t.header)).toEqual(Array(FIRST_OVER - 1).fill(null));

    const calls = standIn!.generateCalls();
    expect(calls).toHaveLength(FIRST_OVER + 1);
    const [rejected, replay] = calls.slice(-2);
    expect(rejected.body.length).toBeGreaterThan(LIMIT);
    expect(
      standIn!
        .checks()
        .map((c) => c.refused)
        .filter((r) => r !== null),
    ).toEqual([standIn!.checks()[FIRST_OVER - 1].refused]);
    expect(isOverflow(standIn!.checks()[FIRST_OVER - 1].refused)).toBe(true);
    expect(standIn!.checks().at(-1)).toEqual({ refused: null });
    expectValidReplay(rejected, replay);

    const rescued = turns.at(-1)!;
    // Masking the oldest file reads is enough here: no summarizer call.
    expect(rescued.header).toMatchObject({
      outcome: 'replayed',
      trigger: 'rejected',
      reason: 'context_length',
      strategy: 'mask',
      limit: 'stated',
    });
    expect(rescued.header!['messages-after']).toBe(rescued.header!['messages-before']);
    expect(rescued.header!.cut ?? 0).toBe(0);
    // The SDK got the replay's answer, real content: the text, then the call with its signature.
    expect(rescued.parts).toEqual(lastIssued());
    expect(rescued.parts.map((p) => Object.keys(p))).toEqual([['text'], ['functionCall', 'thoughtSignature']]);
    expect(rescued.chunks).toBe(2);
    // The stated window: the replay is under it.
    expect(tokensOf(replay.body.length)).toBeLessThanOrEqual(Math.floor(LIMIT / 4));
    expect(replay.body.length).toBeLessThanOrEqual(LIMIT);
    expect(standIn!.summarizerCalls()).toEqual([]);

    // A later turn: compacted ahead from memory, one call, accepted.
    for (let t = 0; t < 2; t++) {
      const before = standIn!.generateCalls().length;
      const later = await agent.turn(origin);
      expect(later.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive', strategy: 'mask' });
      expect(standIn!.generateCalls().length - before).toBe(1);
      expect(standIn!.checks().at(-1)).toEqual({ refused: null });
      expect(later.parts).toEqual(lastIssued());
      const sent = standIn!.generateCalls().at(-1)!;
      expectPairsIntact(sent.json.contents);
      expect(sent.json.contents.at(-1)).toEqual(agent.contents.at(-3));
      expect(newestModel(sent.json.contents)).toEqual(agent.contents.at(-4));
    }
  });
});

describe('an in-stream failure', () => {
  it('without the gateway the SDK hands the agent an empty chunk, the error dropped; through it, the replay\u2019s content', async () => {
    const origin = (await start('stream_error')).origin;
    const agent = new Agent(true);
    for (let t = 1; t < FIRST_OVER; t++) await agent.turn(origin);
    const direct = new GoogleGenAI({ apiKey: API_KEY, httpOptions: { baseUrl: standIn!.origin } });
    const chunks: any[] = [];
    for await (const chunk of await direct.models.generateContentStream({ model: MODEL, contents: agent.contents, config: CONFIG }))
      chunks.push(chunk);
    expect(chunks).toHaveLength(1);
    expect(chunks[0].candidates).toBeUndefined();
    expect(isOverflow(standIn!.checks().at(-1)!.refused)).toBe(true);

    const rescued = await agent.turn(origin);
    expect(rescued.header).toMatchObject({ outcome: 'replayed', reason: 'context_length' });
    expect(rescued.parts).toEqual(lastIssued());
    expect(rescued.parts[0].text).toMatch(/^Let me read src\/module\d+\.ts next\.$/);
  });
});

describe('the newest model turn\u2019s signature', () => {
  it('is what the stand-in checks: the replay without it would be refused', async () => {
    const origin = (await start('invalid_argument')).origin;
    await untilOverflow(new Agent(false), origin);
    const replay = standIn!.generateCalls().at(-1)!;
    const contents = structuredClone(replay.json.contents);
    const newest = newestModel(contents);
    const call = newest.parts.find((p: any) => p.functionCall);
    delete call.thoughtSignature;
    const position =
      contents.slice(0, contents.indexOf(newest)).reduce((n: number, c: any) => n + c.parts.length, 0) + newest.parts.indexOf(call) + 1;
    const res = await fetch(`${standIn!.origin}/v1beta/models/${MODEL}:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': API_KEY },
      body: JSON.stringify({ ...replay.json, contents }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.message).toBe(MESSAGES.missingSignature('read_file', position));
  });
});

describe('the key sent as ?key=', () => {
  const CLIENT_KEY = 'AIza-client-in-query';
  const OWN_KEY = 'AIza-gateway-own-key';

  /** Seven turns with the SDK, then the overflowing one and one more by fetch with ?key=. */
  async function session(origin: string): Promise<Turn[]> {
    const agent = new Agent(false);
    for (let t = 1; t < FIRST_OVER; t++) await agent.turn(origin);
    return [await agent.turnWithQueryKey(origin, CLIENT_KEY), await agent.turnWithQueryKey(origin, CLIENT_KEY)];
  }

  it('is the summarizer\u2019s credential: rescued with strategy=summarize, the key on every call', async () => {
    // Masking off: the summarizer is asked.
    const origin = (await start('invalid_argument', { compaction: { mask: false } })).origin;
    const [rescued, later] = await session(origin);
    expect(rescued.status).toBe(200);
    expect(rescued.header).toMatchObject({ outcome: 'replayed', strategy: 'summarize' });
    expect(rescued.parts).toEqual(standIn!.issued().at(-2)!.parts);
    expect(later.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
    const [summarizer] = standIn!.summarizerCalls();
    // The summarizer spoke the Gemini API, the request's key as its header.
    expect(summarizer.url).toBe(`/v1beta/models/${MODEL}:generateContent`);
    expect(summarizer.headers['x-goog-api-key']).toBe(CLIENT_KEY);
    // The rejected request, its replay and the next turn went as the client sent them: ?key=.
    const calls = standIn!.generateCalls().slice(FIRST_OVER - 1);
    expect(calls.map((c) => c.url)).toEqual(Array(3).fill(`/v1beta/models/${MODEL}:generateContent?key=${CLIENT_KEY}`));
    expect(standIn!.keys().every((k) => k !== null)).toBe(true);
    expect(gateway!.logText()).not.toContain(CLIENT_KEY);
  });

  it('with the gateway\u2019s own key: the client\u2019s never goes upstream, the gateway\u2019s goes as x-goog-api-key', async () => {
    // Masking off: the summarizer is asked, and its key checked too.
    const origin = (await start('invalid_argument', { compaction: { mask: false } }, OWN_KEY)).origin;
    const [rescued, later] = await session(origin);
    expect(rescued.header).toMatchObject({ outcome: 'replayed', strategy: 'summarize' });
    expect(later.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
    // Sized to the window the refusal stated (the summarizer is the upstream's own model): one call or more, each with the key.
    expect(standIn!.summarizerCalls().length).toBeGreaterThan(0);
    expect(standIn!.keys()).toEqual(standIn!.received.map(() => ({ via: 'x-goog-api-key', key: OWN_KEY })));
    for (const r of standIn!.received) expect(r.url).not.toContain('key=');
    expect(standIn!.received.map((r) => JSON.stringify(r.headers)).join()).not.toContain(CLIENT_KEY);
    const log = gateway!.logText();
    for (const key of [CLIENT_KEY, OWN_KEY, API_KEY]) expect(log).not.toContain(key);
  });
});

describe('metrics', () => {
  it('count the rescue under api="gemini", the compaction ahead, and the route by its pattern', async () => {
    const origin = (await start('invalid_argument')).origin;
    const agent = new Agent(true);
    await untilOverflow(agent, origin);
    await agent.turn(origin);
    const metrics = await (await fetch(`${origin}/metrics`)).text();
    const series = (prefix: string) => metrics.split('\n').filter((l) => l.startsWith(prefix) && !l.endsWith(' 0'));
    expect(series('gateway_overlong_rejections_total{api="gemini"')).toEqual([
      'gateway_overlong_rejections_total{api="gemini",reason="context_length",upstream="default"} 1',
    ]);
    expect(series('gateway_replays_total{api="gemini"')).toEqual([
      'gateway_replays_total{api="gemini",result="success",upstream="default"} 1',
    ]);
    expect(series('gateway_compactions_total{api="gemini"')).toEqual([
      'gateway_compactions_total{api="gemini",strategy="mask",outcome="replayed",upstream="default"} 1',
      'gateway_compactions_total{api="gemini",strategy="mask",outcome="compacted",upstream="default"} 1',
    ]);
    expect(total(metrics, 'gateway_summarizer_calls_total')).toBe(0);
    expect(series('gateway_compaction_removed_bytes_total{api="gemini"}')).toHaveLength(1);
    expect(metrics).toContain('gateway_proactive_compactions_total 1');
    expect(metrics).toContain('gateway_binding_refusals_total{api="gemini",request="compacted"} 0');
    expect(metrics).toContain(
      'gateway_http_requests_total{route="/v1beta/models/{model}:streamGenerateContent",method="POST",status_class="2xx",upstream="default"} 9',
    );
    for (const other of ['chat', 'responses', 'messages']) expect(series(`gateway_overlong_rejections_total{api="${other}"`)).toEqual([]);
  });
});
