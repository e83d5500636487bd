import { request as httpRequest } from 'node:http';
import { gzipSync } from 'node:zlib';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import type { ConfigInput } from '../../src/config/schema.js';
import type { Received } from '../helpers/fake-upstream.js';
import { postJson, startGateway, type Posted, type TestGateway } from '../helpers/gateway.js';
import { carries, credentialsOf } from '../helpers/multi-upstream.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';

/*
 * A gateway before two providers, `cloud` (the default) and `local` (where `qwen*` goes), each
 * holding its own key, with gateway keys on. Every request must reach the upstream its top-level
 * `model` routes to, as the upstream's JSON parser reads it: written after the conversation (as the
 * OpenAI and Anthropic Python SDKs write it) or before it (as the TypeScript SDKs pass the
 * caller's object), behind nested decoys, repeated, escaped, in conversations of 1 KB to 10 MB.
 * The stand-in answers with the model it read, and what each provider received shows whose key
 * came with it. A body whose model cannot be read goes where the config sends unknown models, or
 * is refused: never guessed into the default.
 */

const GATEWAY_KEY = 'gw-key-model-routes-5d2a';
const KEYS = { cloud: 'sk-cloud-model-routes-1f3e', local: 'sk-local-model-routes-9b7c' } as const;
type Side = keyof typeof KEYS;
const QWEN = 'qwen3-coder';
const GPT = 'gpt-4.1';

let standIns: Record<Side, StandIn> | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await Promise.all(Object.values(standIns ?? {}).map((s) => s.close()));
  gateway = standIns = undefined;
});

const ROUTES: ConfigInput['routes'] = [
  { model: 'qwen*', upstream: 'local' },
  { model: 'qwen*', upstream: 'local-gemini' },
  { api: 'gemini', upstream: 'cloud-gemini' },
];

async function setup(routes: ConfigInput['routes'] = ROUTES): Promise<{ gw: TestGateway; s: Record<Side, StandIn> }> {
  const [cloud, local] = await Promise.all([startStandIn(), startStandIn()]);
  standIns = { cloud, local };
  const three = ['chat', 'responses', 'messages'] as const;
  gateway = await startGateway({
    upstreams: {
      cloud: { url: cloud.baseUrl, apiKey: KEYS.cloud, apis: [...three] },
      local: { url: local.baseUrl, apiKey: KEYS.local, apis: [...three] },
      // Gemini's base URL is the origin.
      'cloud-gemini': { url: cloud.origin, apiKey: KEYS.cloud, apis: ['gemini'] },
      'local-gemini': { url: local.origin, apiKey: KEYS.local, apis: ['gemini'] },
    },
    defaultUpstream: 'cloud',
    routes,
    auth: { keys: [GATEWAY_KEY] },
  });
  return { gw: gateway, s: standIns };
}

/** What each provider received while `send` ran; and that none of it carried a key not its own. */
async function delivered(send: () => Promise<unknown>): Promise<Record<Side, Received[]>> {
  const s = standIns!;
  const before = { cloud: s.cloud.received.length, local: s.local.received.length };
  await send();
  const got = { cloud: s.cloud.received.slice(before.cloud), local: s.local.received.slice(before.local) };
  for (const side of ['cloud', 'local'] as const) {
    const other = side === 'cloud' ? KEYS.local : KEYS.cloud;
    for (const r of got[side]) {
      expect(credentialsOf(r).join(), `${side} ${r.url}`).toContain(KEYS[side]);
      expect(carries(r, other), `${side} ${r.url} carries the other provider's key`).toBe(false);
      expect(carries(r, GATEWAY_KEY), `${side} ${r.url} carries the gateway key`).toBe(false);
    }
  }
  return got;
}

/** `send` reached `side` once, and the other provider never. */
async function reaches(side: Side, send: () => Promise<unknown>): Promise<Received> {
  const got = await delivered(send);
  const other: Side = side === 'cloud' ? 'local' : 'cloud';
  expect(
    got[other].map((r) => r.url),
    `reached ${other}`,
  ).toEqual([]);
  expect(got[side], `reached ${side}`).toHaveLength(1);
  return got[side][0];
}

/** POSTs a body in pieces, without a Content-Length (chunked), and reads the answer. */
function chunked(url: string, pieces: string[], headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    for (const piece of pieces) req.write(piece);
    req.end();
  });
}

const lastLoggedModel = () =>
  gateway!
    .logLines()
    .filter((l) => l.msg === 'request completed')
    .at(-1)?.model;

/** About `bytes` of conversation text, with quotes and newlines to escape. */
const text = (bytes: number) => 'read "src/a.ts": const x = 1;\n'.repeat(Math.ceil(bytes / 31)).slice(0, bytes);
const SIZES = [1_000, 3_000, 100_000, 10_000_000];

const auth = { authorization: `Bearer ${GATEWAY_KEY}` };
const anthropicAuth = { 'x-api-key': GATEWAY_KEY, 'anthropic-version': '2023-06-01' };

/*
 * Bodies as the Python SDKs write them: their body dicts list the parameters in their own order,
 * not the caller's. openai-python's chat.completions.create: messages, model, then the rest
 * (metadata, stream, tools); responses.create: alphabetical (include, input, instructions,
 * metadata, model, ...); anthropic-python's messages.create: max_tokens, messages, model, metadata, ...
 */
const PYTHON = {
  chat: (model: string, bytes: number) =>
    `{"messages":${JSON.stringify([
      { role: 'system', content: 'You are a coding agent.' },
      { role: 'user', content: text(bytes) },
    ])},"model":${JSON.stringify(model)},"metadata":{"model":"${GPT}"},"store":true,"stream":false}`,
  responses: (model: string, bytes: number) =>
    `{"input":${JSON.stringify([{ role: 'user', content: text(bytes) }])},"instructions":"You are a coding agent.","metadata":{"model":"${QWEN === model ? GPT : QWEN}"},"model":${JSON.stringify(model)},"store":false}`,
  messages: (model: string, bytes: number) =>
    `{"max_tokens":1024,"messages":${JSON.stringify([{ role: 'user', content: text(bytes) }])},"model":${JSON.stringify(model)},"metadata":{"user_id":"u-1"}}`,
};
const PATHS = { chat: '/chat/completions', responses: '/responses', messages: '/messages' } as const;
const HEADERS = { chat: auth, responses: auth, messages: anthropicAuth } as const;

describe('a request reaches the upstream its top-level model routes to', () => {
  describe.each(['chat', 'responses', 'messages'] as const)('%s, as the Python SDK orders the body', (api) => {
    it.each(SIZES.flatMap((bytes) => [QWEN, GPT].map((model) => [model, bytes] as const)))(
      'model %s, %i bytes of conversation',
      async (model, bytes) => {
        const { gw } = await setup();
        const body = PYTHON[api](model, bytes);
        let answer: Posted | undefined;
        const got = await reaches(
          model === QWEN ? 'local' : 'cloud',
          async () => (answer = await postJson(`${gw.baseUrl}${PATHS[api]}`, body, HEADERS[api])),
        );
        expect(answer!.status).toBe(200);
        expect(answer!.json.model).toBe(model);
        expect(got.body.equals(Buffer.from(body)), 'the bytes went as sent').toBe(true);
        expect(lastLoggedModel()).toBe(model);
      },
      30_000,
    );
  });

  it.each([
    ['repeated: the last one counts', `{"model":"${GPT}","messages":[{"role":"user","content":"hi"}],"model":"${QWEN}"}`, 'local', QWEN],
    ['repeated the other way', `{"model":"${QWEN}","messages":[{"role":"user","content":"hi"}],"model":"${GPT}"}`, 'cloud', GPT],
    ['an escaped key', `{"messages":[{"role":"user","content":"hi"}],"\\u006dodel":"${QWEN}"}`, 'local', QWEN],
    ['an escaped value', `{"messages":[{"role":"user","content":"hi"}],"model":"qwen\\u0033-coder"}`, 'local', QWEN],
    [
      'a decoy in metadata before it',
      `{"metadata":{"model":"${QWEN}"},"messages":[{"role":"user","content":"hi"}],"model":"${GPT}"}`,
      'cloud',
      GPT,
    ],
    [
      'a decoy inside the conversation',
      `{"messages":[{"role":"user","content":"{\\"model\\":\\"${QWEN}\\"}"}],"model":"${GPT}"}`,
      'cloud',
      GPT,
    ],
    [
      "a decoy in a tool's schema",
      `{"tools":[{"type":"function","function":{"name":"pick","parameters":{"type":"object","properties":{"model":{"type":"string"}},"model":"${GPT}"}}}],"messages":[{"role":"user","content":"hi"}],"model":"${QWEN}"}`,
      'local',
      QWEN,
    ],
  ] as const)('chat, %s', async (_name, body, side, model) => {
    const { gw } = await setup();
    expect(JSON.parse(body).model).toBe(model);
    let answer: Posted | undefined;
    await reaches(side, async () => (answer = await postJson(`${gw.baseUrl}/chat/completions`, body, auth)));
    expect([answer!.status, answer!.json.model]).toEqual([200, model]);
    expect(lastLoggedModel()).toBe(model);
  });

  describe('through the TypeScript SDKs, the model written before and after the conversation', () => {
    const conversation = text(5_000);

    it.each([
      ['model first', QWEN, 'local'],
      ['model last', QWEN, 'local'],
      ['model last', GPT, 'cloud'],
    ] as const)('openai chat: %s, %s', async (order, model, side) => {
      const { gw } = await setup();
      const sdk = new OpenAI({ baseURL: gw.baseUrl, apiKey: GATEWAY_KEY, maxRetries: 0 });
      const messages = [{ role: 'user' as const, content: conversation }];
      const params =
        order === 'model first' ? { model, metadata: { model: GPT }, messages } : { metadata: { model: GPT }, messages, model };
      let answer: OpenAI.ChatCompletion | undefined;
      await reaches(side, async () => (answer = await sdk.chat.completions.create(params)));
      expect(answer!.model).toBe(model);
    });

    it.each([QWEN, GPT])('openai responses: input and a decoy in metadata first, %s last', async (model) => {
      const { gw } = await setup();
      const sdk = new OpenAI({ baseURL: gw.baseUrl, apiKey: GATEWAY_KEY, maxRetries: 0 });
      let answer: OpenAI.Responses.Response | undefined;
      await reaches(
        model === QWEN ? 'local' : 'cloud',
        async () => (answer = await sdk.responses.create({ input: conversation, metadata: { model: model === QWEN ? GPT : QWEN }, model })),
      );
      expect(answer!.model).toBe(model);
    });

    it.each([QWEN, GPT])('anthropic messages: a tool call naming another model, then %s', async (model) => {
      const { gw } = await setup();
      const sdk = new Anthropic({ baseURL: gw.origin, apiKey: GATEWAY_KEY, maxRetries: 0 });
      const messages: Anthropic.MessageParam[] = [
        { role: 'user', content: conversation },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 'toolu_1', name: 'switch_model', input: { model: model === QWEN ? GPT : QWEN } }],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'done' }] },
      ];
      let answer: Anthropic.Message | undefined;
      await reaches(
        model === QWEN ? 'local' : 'cloud',
        async () => (answer = await sdk.messages.create({ max_tokens: 256, messages, model })),
      );
      expect(answer!.model).toBe(model);
    });

    it.each([
      [QWEN, 'local'],
      ['gemini-2.5-pro', 'cloud'],
    ] as const)('google genai: %s, from the path', async (model, side) => {
      const { gw } = await setup();
      const ai = new GoogleGenAI({ apiKey: GATEWAY_KEY, httpOptions: { baseUrl: gw.origin } });
      const got = await reaches(side, () =>
        ai.models.generateContent({ model, contents: [{ role: 'user', parts: [{ text: conversation }] }] }),
      );
      expect(got.url).toBe(`/v1beta/models/${model}:generateContent`);
      expect(lastLoggedModel()).toBe(model);
    });
  });

  it.each([
    ['/chat/completions', () => PYTHON.chat(QWEN, 5_000), auth],
    ['/messages/count_tokens', () => PYTHON.messages(QWEN, 5_000).replace('"max_tokens":1024,', ''), anthropicAuth],
  ] as const)('%s gzipped: the model read once the body is decoded, the bytes sent as they came', async (path, body, headers) => {
    const { gw } = await setup();
    const zipped = gzipSync(body());
    const got = await reaches('local', () => postJson(`${gw.baseUrl}${path}`, zipped, { ...headers, 'content-encoding': 'gzip' }));
    expect(got.body.equals(zipped)).toBe(true);
  });

  describe('on the pass-through paths', () => {
    it("anthropic's count_tokens, messages before the model, goes by the model", async () => {
      const { gw } = await setup();
      const sdk = new Anthropic({ baseURL: gw.origin, apiKey: GATEWAY_KEY, maxRetries: 0 });
      const body = JSON.parse(PYTHON.messages(QWEN, 5_000));
      delete body.max_tokens;
      const got = await reaches('local', () => sdk.messages.countTokens(body).catch((err: unknown) => err));
      expect(got.url).toBe('/v1/messages/count_tokens');
      expect(got.json.model).toBe(QWEN);
    });

    it('a chunked body, the model in its last chunk, goes by the model and upstream whole', async () => {
      const { gw } = await setup();
      const body = PYTHON.messages(QWEN, 200_000).replace('"max_tokens":1024,', '');
      const cut = body.lastIndexOf('"model"') + 3;
      const got = await reaches('local', () =>
        chunked(`${gw.origin}/v1/messages/count_tokens`, [body.slice(0, cut), body.slice(cut)], anthropicAuth),
      );
      expect(got.headers['content-length']).toBeUndefined();
      expect(got.body.toString()).toBe(body);
    });

    it("gemini's countTokens goes by the model its path names", async () => {
      const { gw } = await setup();
      const ai = new GoogleGenAI({ apiKey: GATEWAY_KEY, httpOptions: { baseUrl: gw.origin } });
      const got = await reaches('local', () =>
        ai.models.countTokens({ model: QWEN, contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }).catch((err: unknown) => err),
      );
      expect(got.url).toBe(`/v1beta/models/${QWEN}:countTokens`);
    });

    it('a GET has no model and goes to the default', async () => {
      const { gw } = await setup();
      await reaches('cloud', () => fetch(`${gw.baseUrl}/models`, { headers: auth }).then((r) => r.text()));
    });
  });
});

describe('a body whose model cannot be read', () => {
  const unreadable = [
    ['no model', 'chat', `{"messages":[{"role":"user","content":"${text(3_000)}"}],"metadata":{"model":"${QWEN}"}}`],
    ['a model that is not a string', 'chat', `{"messages":[],"model":["${QWEN}"]}`],
    ['not JSON', 'chat', `model=${QWEN}&messages=hi`],
    ['cut short', 'responses', `{"input":"hi","model":"${QWEN}"`],
    ['no model', 'messages', `{"max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`],
  ] as const;

  it.each(unreadable)("%s (%s): 400 model_unreadable in the API's error shape, and no upstream hears of it", async (_name, api, body) => {
    const { gw } = await setup();
    let answer: Posted | undefined;
    const got = await delivered(async () => (answer = await postJson(`${gw.baseUrl}${PATHS[api]}`, body, HEADERS[api])));
    expect(got).toEqual({ cloud: [], local: [] });
    expect(answer!.status).toBe(400);
    if (api === 'messages')
      expect(answer!.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', code: 'model_unreadable' } });
    else
      expect(answer!.json.error).toMatchObject({
        type: 'invalid_request_error',
        code: 'model_unreadable',
        message: expect.stringContaining('could not read'),
      });
  });

  it.each(unreadable)('%s (%s): goes where a route for unknown models sends it', async (_name, api, body) => {
    const { gw } = await setup([...ROUTES, { unknownModel: true, upstream: 'local' }]);
    const got = await reaches('local', () => postJson(`${gw.baseUrl}${PATHS[api]}`, body, HEADERS[api]));
    expect(got.body.toString()).toBe(body);
  });

  it('the official SDK raises its BadRequestError with the code', async () => {
    const { gw } = await setup();
    const sdk = new OpenAI({ baseURL: gw.baseUrl, apiKey: GATEWAY_KEY, maxRetries: 0 });
    const err = await sdk.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] } as never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('model_unreadable');
  });

  it('a route by API alone still takes it: the config said where all of that API goes', async () => {
    const { gw } = await setup([{ api: 'messages', upstream: 'cloud' }, ...ROUTES]);
    await reaches('cloud', () => postJson(`${gw.baseUrl}/messages`, unreadable[4][2], anthropicAuth));
  });
});
