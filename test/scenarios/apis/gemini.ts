import {
  ApiError,
  FunctionCallingConfigMode,
  GoogleGenAI,
  HarmBlockThreshold,
  HarmCategory,
  ThinkingLevel,
  type GenerateContentConfig,
} from '@google/genai';
import { expect } from 'vitest';
import type { Received } from '../../helpers/fake-upstream.js';
import { MESSAGES } from '../../helpers/strict-gemini.js';
import { CONTENT_TEXT, fileText, headerOf, QUESTION, REMARK, TASK, type ApiFixture, type Body, type Turn } from './fixture.js';

/* The Gemini API, as Gemini CLI sends it through @google/genai: the model parts kept exactly as they came. */

const MODEL = 'gemini-3.1-pro-preview';
const API_KEY = 'AIza-scenario-key';

/** Every field of the request besides contents, as the SDK sends them, and one it does not know. */
const CONFIG = {
  systemInstruction: 'You are a coding agent.',
  tools: [
    {
      functionDeclarations: [
        {
          name: 'read_file',
          description: 'Read a file',
          parametersJsonSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
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

function request(turns: number): Body {
  const contents: any[] = [{ role: 'user', parts: [{ text: TASK }] }];
  for (let t = 1; t <= turns; t++) {
    contents.push({
      role: 'model',
      parts: [{ functionCall: { id: `read_file_${t}`, name: 'read_file', args: { path: `src/module${t}.ts` } } }],
    });
    contents.push({
      role: 'user',
      parts: [{ functionResponse: { id: `read_file_${t}`, name: 'read_file', response: { output: fileText(t) } } }],
    });
  }
  contents.push({ role: 'model', parts: [{ text: REMARK }] }, { role: 'user', parts: [{ text: QUESTION }] });
  return { contents };
}

/** The body the SDK writes for `contents` (what a Gemini CLI request looks like). */
function wire(body: Body): Body {
  const { systemInstruction, tools, toolConfig, safetySettings, ...generationConfig } = CONFIG;
  return {
    contents: body.contents,
    systemInstruction: { parts: [{ text: systemInstruction }], role: 'user' },
    safetySettings,
    tools,
    toolConfig,
    generationConfig,
    ...UNKNOWN,
  };
}

const newestModel = (contents: any[]) => contents.findLast((c) => c.role === 'model');
const summaryOf = (contents: any[]) =>
  contents.find((c) => c.parts.some((p: any) => typeof p.text === 'string' && p.text.includes('[compaction-gateway]')));
const MASKED = '[tool output omitted by compaction-gateway: read_file, ';

/** Every functionResponse right after the model turn that issued its call, and every call answered there. */
function brokenPairs(body: Body): string[] {
  const contents: any[] = body.contents;
  const ids = (c: any, kind: string) => (c?.parts ?? []).filter((p: any) => p[kind]).map((p: any) => p[kind].id);
  const broken: string[] = [];
  contents.forEach((content, i) => {
    const responses = ids(content, 'functionResponse');
    const calls = ids(content, 'functionCall');
    if (responses.length > 0 && JSON.stringify(ids(contents[i - 1], 'functionCall')) !== JSON.stringify(responses))
      broken.push(`contents[${i}]: responses ${responses} not right after their calls`);
    if (calls.length > 0 && JSON.stringify(ids(contents[i + 1], 'functionResponse')) !== JSON.stringify(calls))
      broken.push(`contents[${i}]: calls ${calls} not answered right after`);
  });
  return broken;
}

/**
 * A replay the strict API takes: smaller, its pairs intact, model turns as sent, the rest of the
 * request as sent. Masked, every turn stays where it was; summarised, a user turn stands for several.
 */
export function expectValidGeminiReplay(rejected: Received, replay: Received): void {
  const before = rejected.json.contents as any[];
  const after = replay.json.contents as any[];
  const masked = /strategy=mask\b/.test(String(replay.headers['x-gateway-compaction']));
  if (masked) expect(after.length).toBe(before.length);
  else expect(after.length).toBeLessThan(before.length);
  expect(replay.body.length).toBeLessThan(rejected.body.length);
  expect(brokenPairs(replay.json)).toEqual([]);
  const { contents: _a, ...fieldsBefore } = rejected.json;
  const { contents: _b, ...fieldsAfter } = replay.json;
  expect(fieldsAfter).toEqual(fieldsBefore);
  expect(Object.keys(replay.json)).toEqual(Object.keys(rejected.json));
  // A model turn is kept whole or not at all; the newest one is kept, its signature byte for byte.
  const sentBefore = new Set(before.filter((c) => c.role === 'model').map((c) => JSON.stringify(c)));
  for (const model of after.filter((c) => c.role === 'model')) expect(sentBefore.has(JSON.stringify(model))).toBe(true);
  expect(newestModel(after)).toEqual(newestModel(before));
  const signature = newestModel(before).parts.find((p: any) => p.functionCall)?.thoughtSignature;
  if (signature !== undefined) expect(replay.body.toString('utf8')).toContain(`"thoughtSignature":${JSON.stringify(signature)}`);
  // The summary is a user turn (masked: the oldest outputs are placeholders in their own turns),
  // turns alternate, the last one is whole.
  if (masked) {
    expect(summaryOf(after)).toBeUndefined();
    expect(after.filter((c) => c.role === 'user' && JSON.stringify(c).includes(MASKED)).length).toBeGreaterThan(0);
    expect(JSON.stringify(before)).not.toContain(MASKED);
  } else {
    expect(summaryOf(after).role).toBe('user');
  }
  after.forEach((c, i) => i > 0 && expect(c.role, `contents[${i}]`).not.toBe(after[i - 1].role));
  expect(after.at(-1)).toEqual(before.at(-1));
  expect(replay.url).toBe(rejected.url);
  expect(replay.headers['x-goog-api-key']).toBe(rejected.headers['x-goog-api-key']);
  expect(replay.headers['x-gateway-compaction']).toMatch(/outcome=replayed/);
}

const sdk = (origin: string) => new GoogleGenAI({ apiKey: API_KEY, httpOptions: { baseUrl: origin } });
const params = (body: Body, headers: Record<string, string> = {}) => ({
  model: MODEL,
  contents: body.contents,
  config: { ...CONFIG, httpOptions: { headers, extraBody: UNKNOWN } },
});
const textOf = (parts: any[]) =>
  parts
    .filter((p) => typeof p.text === 'string')
    .map((p) => p.text)
    .join('');

async function send(origin: string, body: Body, o: { stream: boolean; headers?: Record<string, string> }): Promise<Turn> {
  try {
    let parts: any[] = [];
    let raw: Record<string, string> | undefined;
    if (o.stream) {
      for await (const chunk of await sdk(origin).models.generateContentStream(params(body, o.headers))) {
        raw = chunk.sdkHttpResponse?.headers;
        parts.push(...(chunk.candidates?.[0]?.content?.parts ?? []));
      }
    } else {
      const answer = await sdk(origin).models.generateContent(params(body, o.headers));
      raw = answer.sdkHttpResponse?.headers;
      parts = answer.candidates?.[0]?.content?.parts ?? [];
    }
    return { status: 200, header: headerOf(raw?.['x-gateway-compaction']), text: textOf(parts), answer: parts };
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    let error: string | undefined;
    try {
      error = JSON.parse(err.message).error.message;
    } catch {
      error = err.message;
    }
    return { status: err.status, header: null, text: '', answer: null, error };
  }
}

const sse = (data: unknown) => `data: ${JSON.stringify(data)}\r\n\r\n`;

export const geminiFixture: ApiFixture = {
  api: 'gemini',
  upstreamUrl: (standIn) => standIn.origin,
  request,
  next(body, turn) {
    const parts = turn.answer as any[];
    const calls = parts.filter((p) => p.functionCall).map((p) => p.functionCall);
    const n = body.contents.length;
    return {
      ...body,
      contents: [
        ...body.contents,
        { role: 'model', parts },
        { role: 'user', parts: calls.map(({ id, name }) => ({ functionResponse: { id, name, response: { output: fileText(n) } } })) },
      ],
    };
  },
  reject: (style) =>
    style === 'page' ? { reason: 'body_too_large', statesWindow: false } : { reason: 'context_length', statesWindow: true },
  // A Gemini stream has no preamble: every chunk is a whole response.
  preamble: () => [],
  idleEvent: () => null,
  contentEvent: () =>
    sse({
      candidates: [{ content: { role: 'model', parts: [{ text: CONTENT_TEXT }] }, index: 0 }],
      modelVersion: MODEL,
      responseId: 'started-1',
    }),
  failureEvent: () => sse({ error: { code: 400, message: MESSAGES.window(50_000, 10_000), status: 'INVALID_ARGUMENT' } }),
  send,
  async sdkStream(origin, body, onContent) {
    let said = '';
    let failure = 'none';
    try {
      for await (const chunk of await sdk(origin).models.generateContentStream(params(body))) {
        const parts = chunk.candidates?.[0]?.content?.parts;
        if (parts === undefined) failure = 'an empty chunk';
        said += textOf(parts ?? []);
        if (said) onContent();
      }
      return { text: said, failure };
    } catch (err) {
      return { text: said, failure: `thrown: ${(err as Error).message}` };
    }
  },
  // @google/genai makes the error chunk an empty one: no candidates, no error.
  sdkFailure: /^an empty chunk$/,
  wire: (body) => wire(body),
  post: (origin, bytes, o) =>
    fetch(`${origin}/v1beta/models/${MODEL}:${o.stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': API_KEY, ...o.headers },
      body: bytes,
    }),
  expectValidReplay: expectValidGeminiReplay,
  brokenPairs,
};
