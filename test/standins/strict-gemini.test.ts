import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { startStandIn, NGINX_413 } from '../helpers/provider.js';
import type { StrictGemini, StrictGeminiOptions } from '../helpers/strict-gemini.js';

/*
 * The strict Gemini stand-in enforces what the API documents for Gemini 3 tool use (the newest
 * model turn's thought signatures, function responses right after their calls) and its window,
 * with the API's exact errors. Each scenario builds a conversation the way Gemini CLI does, by
 * appending the model parts the stand-in answered with, through plain fetch, then changes one
 * thing and sends it again.
 */

const MODEL = 'gemini-3.1-pro-preview';
const KEY = 'AIza-test-key';
const SYSTEM = { role: 'user', parts: [{ text: 'You review code.' }] };
const TOOLS = [
  {
    functionDeclarations: [
      {
        name: 'read_file',
        description: 'Read a file',
        parametersJsonSchema: { type: 'object', properties: { file_path: { type: 'string' } } },
      },
    ],
  },
];
const USER = { role: 'user', parts: [{ text: 'Review src/.' }] };
const SESSION = new URL('../fixtures/agent-sessions/gemini/', import.meta.url);

let upstream: StrictGemini;
afterEach(async () => upstream?.close());

/** Every answer says a sentence and reads the next file, as the recorded session's model did. */
async function start(options: StrictGeminiOptions = {}) {
  upstream = await startStandIn({
    provider: 'gemini',
    reply: (req) => {
      const n = req.json.contents.length;
      return {
        text: `Let me read f${n}.ts next.`,
        functionCall: { id: `read_file_${n}`, name: 'read_file', args: { file_path: `f${n}.ts` } },
      };
    },
    ...options,
  });
}

type Method = 'generateContent' | 'streamGenerateContent' | 'countTokens';

function send(
  method: Method,
  body: unknown,
  opts: { sse?: boolean; model?: string; headers?: Record<string, string>; query?: string } = {},
) {
  const sse = opts.sse ?? method === 'streamGenerateContent';
  const query = [sse ? 'alt=sse' : '', opts.query ?? ''].filter(Boolean).join('&');
  return fetch(`${upstream.origin}/v1beta/models/${opts.model ?? MODEL}:${method}${query ? `?${query}` : ''}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': KEY, ...opts.headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

const request = (contents: any[]) => ({
  contents,
  systemInstruction: SYSTEM,
  tools: TOOLS,
  generationConfig: { thinkingConfig: { includeThoughts: true, thinkingLevel: 'HIGH' } },
});

/** The data of each SSE event, checking Google's framing: `data: ` then `\r\n\r\n`. */
async function events(res: Response): Promise<any[]> {
  const text = await res.text();
  expect(text.endsWith('\r\n\r\n')).toBe(true);
  return text
    .split('\r\n\r\n')
    .filter(Boolean)
    .map((e) => {
      expect(e.startsWith('data: ')).toBe(true);
      return JSON.parse(e.slice('data: '.length));
    });
}

/** The model content of an answer, its chunks' parts merged as Gemini CLI merges them. */
async function modelTurn(res: Response, method: 'generateContent' | 'streamGenerateContent'): Promise<any> {
  expect(res.status).toBe(200);
  const chunks = method === 'generateContent' ? [await res.json()] : await events(res);
  return { role: 'model', parts: chunks.flatMap((c) => c.candidates[0].content.parts) };
}

/** The user's turn, then `answers` model turns appended as answered, each followed by the user turn
 * with its functionResponse. With three: 0 user, 1 model, 2 response, 3 model, 4 response, 5 model, 6 response. */
async function converse(answers: number, method: 'generateContent' | 'streamGenerateContent' = 'generateContent'): Promise<any[]> {
  let contents: any[] = [USER];
  for (let n = 0; n < answers; n++) {
    const model = await modelTurn(await send(method, request(contents)), method);
    const { id, name } = model.parts.find((p: any) => p.functionCall).functionCall;
    contents = [
      ...contents,
      model,
      { role: 'user', parts: [{ functionResponse: { id, name, response: { output: `contents of the file ${n}` } } }] },
    ];
  }
  return contents;
}

async function refused(res: Response, status = 400): Promise<any> {
  expect(res.status).toBe(status);
  return res.json();
}

const invalid = (message: string) => ({ error: { code: 400, message, status: 'INVALID_ARGUMENT' } });
const missing = (name: string, position: number) =>
  invalid(
    'Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. ' +
      `Additional data, function call \`default_api:${name}\` , position ${position}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.`,
  );
const NOT_VALID = invalid('Thought signature is not valid.');
const PAIRING = invalid('Please ensure that function response turn comes immediately after a function call turn.');
const NO_CONTENTS = invalid('* GenerateContentRequest.contents: contents is not specified\n');
const UNREGISTERED = {
  error: {
    code: 403,
    message:
      "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
    status: 'PERMISSION_DENIED',
  },
};
const windowError = (tokens: number, limit: number) =>
  invalid(`The input token count (${tokens}) exceeds the maximum number of tokens allowed (${limit}).`);

/** The part at contents[i].parts[j], changed. */
const editPart = (contents: any[], i: number, j: number, change: (part: any) => any) =>
  contents.map((c, k) => (k === i ? { ...c, parts: c.parts.map((p: any, m: number) => (m === j ? change(structuredClone(p)) : p)) } : c));
const unsigned = ({ thoughtSignature: _, ...part }: any) => part;

describe('answers', () => {
  it('generateContent answers one candidate: the text, then the call with its signature beside it', async () => {
    await start();
    const body = JSON.stringify(request([USER]));
    const res = await send('generateContent', body);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const answer: any = await res.json();
    const parts = [
      { text: 'Let me read f1.ts next.' },
      { functionCall: { id: 'read_file_1', name: 'read_file', args: { file_path: 'f1.ts' } }, thoughtSignature: expect.any(String) },
    ];
    expect(answer).toEqual({
      candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
      usageMetadata: {
        promptTokenCount: Math.ceil(body.length / 4),
        candidatesTokenCount: expect.any(Number),
        totalTokenCount: expect.any(Number),
      },
      modelVersion: MODEL,
      responseId: expect.any(String),
    });
    const usage = answer.usageMetadata;
    expect(usage.totalTokenCount).toBe(usage.promptTokenCount + usage.candidatesTokenCount);
    expect(upstream.issued()).toEqual([{ call: 0, parts: answer.candidates[0].content.parts }]);
    expect(upstream.checks()).toEqual([{ refused: null }]);
  });

  it('streamGenerateContent?alt=sse streams the text, then the call, finishReason and usage on the last event', async () => {
    await start();
    const res = await send('streamGenerateContent', request([USER]));
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const [first, second, ...rest] = await events(res);
    expect(rest).toEqual([]);
    expect(first.candidates).toEqual([{ content: { role: 'model', parts: [{ text: 'Let me read f1.ts next.' }] }, index: 0 }]);
    expect(first.usageMetadata).toBeUndefined();
    expect(second.candidates[0].content.parts).toEqual([upstream.issued()[0].parts[1]]);
    expect(second.candidates[0].finishReason).toBe('STOP');
    expect(second.usageMetadata.promptTokenCount).toBe(Math.ceil(JSON.stringify(request([USER])).length / 4));
    expect([first.modelVersion, second.modelVersion]).toEqual([MODEL, MODEL]);
    expect(first.responseId).toBe(second.responseId);
  });

  it('streamGenerateContent without alt=sse streams one JSON array of the same responses', async () => {
    await start();
    const res = await send('streamGenerateContent', request([USER]), { sse: false });
    expect(res.status).toBe(200);
    const chunks: any = await res.json();
    expect(chunks).toHaveLength(2);
    expect(chunks.flatMap((c: any) => c.candidates[0].content.parts)).toEqual(upstream.issued()[0].parts);
    expect(chunks[1].candidates[0].finishReason).toBe('STOP');
  });

  it('a text answer is one part, with no signature', async () => {
    await start({ reply: () => ({ text: 'All reviewed.' }) });
    const answer: any = await (await send('generateContent', request([USER]))).json();
    expect(answer.candidates[0].content.parts).toEqual([{ text: 'All reviewed.' }]);
  });

  it.each([
    ['contents', (contents: any[]) => ({ contents })],
    ['generateContentRequest', (contents: any[]) => ({ generateContentRequest: { model: `models/${MODEL}`, contents } })],
  ])('countTokens answers totalTokens (%s), and is not a generate call', async (_, body) => {
    await start();
    const sent = JSON.stringify(body([USER]));
    const res = await send('countTokens', sent);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ totalTokens: Math.ceil(sent.length / 4) });
    expect(upstream.countTokensCalls()).toHaveLength(1);
    expect([upstream.generateCalls(), upstream.checks()]).toEqual([[], []]);
  });

  it('another path is a 404', async () => {
    await start();
    const res = await fetch(`${upstream.origin}/v1/chat/completions`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(404);
  });
});

describe('credentials', () => {
  it.each([
    ['the x-goog-api-key header', {}, { via: 'x-goog-api-key', key: KEY }],
    ['the ?key= query', { headers: { 'x-goog-api-key': '' }, query: 'key=AIza-in-query' }, { via: 'key', key: 'AIza-in-query' }],
  ])('are accepted and recorded from %s', async (_, opts, key) => {
    await start();
    expect((await send('generateContent', request([USER]), opts)).status).toBe(200);
    expect(upstream.keys()).toEqual([key]);
  });

  it.each(['generateContent', 'streamGenerateContent', 'countTokens'] as const)('none: 403 PERMISSION_DENIED (%s)', async (method) => {
    await start();
    const res = await send(method, request([USER]), { headers: { 'x-goog-api-key': '' } });
    expect(await refused(res, 403)).toEqual(UNREGISTERED);
    expect(upstream.keys()).toEqual([null]);
  });
});

describe('the request', () => {
  it.each([
    ['not JSON', '{"contents": ['],
    ['without contents', JSON.stringify({ systemInstruction: SYSTEM })],
    ['with empty contents', JSON.stringify({ contents: [] })],
    ['with contents not an array', JSON.stringify({ contents: USER })],
  ])('%s: 400 contents is not specified', async (_, body) => {
    await start();
    expect(await refused(await send('generateContent', body))).toEqual(NO_CONTENTS);
    expect(upstream.checks()).toEqual([{ refused: '* GenerateContentRequest.contents: contents is not specified\n' }]);
  });

  it('a content without parts: 400 naming it', async () => {
    await start();
    const res = await send('generateContent', request([USER, { role: 'model', parts: [] }, USER]));
    expect(await refused(res)).toEqual(invalid('* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.\n'));
  });

  it.each(['assistant', 'system', 'tool', 'function'])('role %s: 400 valid role', async (role) => {
    await start();
    const res = await send('generateContent', request([USER, { role, parts: [{ text: 'hi' }] }]));
    expect(await refused(res)).toEqual(invalid('Please use a valid role: user, model.'));
  });

  it('a single content without a role is accepted (the field is optional)', async () => {
    await start();
    expect((await send('generateContent', { contents: [{ parts: [{ text: 'hi' }] }] })).status).toBe(200);
  });
});

describe('thought signatures', () => {
  it.each(['generateContent', 'streamGenerateContent'] as const)(
    'a conversation built from its own parts is accepted turn after turn (%s)',
    async (method) => {
      await start();
      const contents = await converse(3, method);
      expect((await send(method, request(contents))).status).toBe(200);
      expect(upstream.checks()).toEqual(Array(4).fill({ refused: null }));
      expect(upstream.issued().map((i) => i.call)).toEqual([0, 1, 2, 3]);
      expect([contents[1], contents[3], contents[5]].map((c) => c.parts)).toEqual(
        upstream
          .issued()
          .slice(0, 3)
          .map((i) => i.parts),
      );
    },
  );

  it('the newest model turn without its signature: 400 naming the call and its position among all parts', async () => {
    await start();
    // parts: 1 user text; 2-3 model; 4 response; 5-6 model; 7 response; 8 text, 9 the call.
    const contents = editPart(await converse(3), 5, 1, unsigned);
    const res = await send('streamGenerateContent', request(contents));
    expect(await refused(res)).toEqual(missing('read_file', 9));
    expect(upstream.checks().at(-1)).toEqual({ refused: missing('read_file', 9).error.message });
  });

  it('position 2 for a call right after a one-part user turn, as Google reports it', async () => {
    await start();
    const contents = [
      USER,
      { role: 'model', parts: [{ functionCall: { id: 'c1', name: 'list_directory', args: {} } }] },
      { role: 'user', parts: [{ functionResponse: { id: 'c1', name: 'list_directory', response: {} } }] },
    ];
    expect(await refused(await send('generateContent', request(contents)))).toEqual(missing('list_directory', 2));
  });

  it('an earlier model turn without its signature is accepted: only the newest turn is validated', async () => {
    await start();
    const contents = editPart(editPart(await converse(3), 1, 1, unsigned), 3, 1, unsigned);
    expect((await send('generateContent', request(contents))).status).toBe(200);
  });

  it.each([
    ['edited', (contents: any[]) => editPart(contents, 5, 1, (p) => ({ ...p, thoughtSignature: `${p.thoughtSignature.slice(0, -2)}AA` }))],
    ['not one it issued', (contents: any[]) => editPart(contents, 5, 1, (p) => ({ ...p, thoughtSignature: 'EvYBCvMBAdHtim9opaque' }))],
    [
      'issued for another call',
      (contents: any[]) => editPart(contents, 5, 1, (p) => ({ ...p, thoughtSignature: contents[3].parts[1].thoughtSignature })),
    ],
    [
      'beside a call whose id changed',
      (contents: any[]) => editPart(contents, 5, 1, (p) => ({ ...p, functionCall: { ...p.functionCall, id: 'read_file_x' } })),
    ],
  ])('a signature %s: 400 not valid', async (_, change) => {
    await start();
    const contents = await converse(3);
    const res = await send('generateContent', request(change(contents)));
    expect(await refused(res)).toEqual(NOT_VALID);
  });

  it('a signature issued by another model: 400 not valid', async () => {
    await start();
    const res = await send('generateContent', request(await converse(2)), { model: 'gemini-3-flash-preview' });
    expect(await refused(res)).toEqual(NOT_VALID);
  });

  it('is checked before the window', async () => {
    await start({ limitBytes: 100 });
    const contents = [USER, { role: 'model', parts: [{ functionCall: { id: 'c1', name: 'read_file', args: {} } }] }];
    expect(await refused(await send('generateContent', request(contents)))).toEqual(missing('read_file', 2));
  });
});

describe('function responses', () => {
  const call = (id?: string) => ({ role: 'model', parts: [{ functionCall: { ...(id ? { id } : {}), name: 'read_file', args: {} } }] });
  const response = (id?: string, name = 'read_file') => ({
    role: 'user',
    parts: [{ functionResponse: { ...(id ? { id } : {}), name, response: { output: 'x' } } }],
  });
  // The calls sit in an earlier model turn (its signature unchecked); the newest model turn is text.
  const after = (...turns: any[]) =>
    request([USER, ...turns, { role: 'model', parts: [{ text: 'Done.' }] }, { role: 'user', parts: [{ text: 'Thanks.' }] }]);

  it.each([
    ['without any call before it', [response('c1')]],
    ['after a user turn', [call('c1'), { role: 'user', parts: [{ text: 'wait' }] }, response('c1')]],
    ['answering another id', [call('c1'), response('c2')]],
    ['twice for one call', [call('c1'), { role: 'user', parts: [...response('c1').parts, ...response('c1').parts] }]],
    ['by a different name, for a call without id', [call(), response(undefined, 'grep_search')]],
  ])('%s: 400', async (_, turns) => {
    await start();
    expect(await refused(await send('generateContent', after(...turns)))).toEqual(PAIRING);
  });

  it.each([
    ['by id', [call('c1'), response('c1')]],
    ['by name and order, for a call without id', [call(), response()]],
  ])('answering the call right before it %s is accepted', async (_, turns) => {
    await start();
    expect((await send('generateContent', after(...turns))).status).toBe(200);
  });

  it('a response whose model turn was dropped, as a careless compaction would, is refused', async () => {
    await start();
    const contents = await converse(2);
    const res = await send('generateContent', request([...contents.slice(0, 3), contents[4]]));
    expect(await refused(res)).toEqual(PAIRING);
  });
});

describe('the window', () => {
  const big = request([{ role: 'user', parts: [{ text: 'x'.repeat(2_000) }] }]);
  const bytes = JSON.stringify(big).length;
  const over = windowError(Math.ceil(bytes / 4), Math.floor(1_000 / 4));

  it.each(['generateContent', 'streamGenerateContent'] as const)('invalid_argument: a body over it is a 400 (%s)', async (method) => {
    await start({ limitBytes: 1_000 });
    expect(await refused(await send(method, big))).toEqual(over);
    expect(upstream.checks()).toEqual([{ refused: over.error.message }]);
    expect((await send(method, request([USER]))).status).toBe(200);
  });

  it('stream_error: a streaming request gets 200 and the error as its only event', async () => {
    await start({ limitBytes: 1_000, style: 'stream_error' });
    const res = await send('streamGenerateContent', big);
    expect(res.status).toBe(200);
    expect(await res.clone().text()).toBe(`data: ${JSON.stringify(over)}\r\n\r\n`);
    expect(await events(res)).toEqual([over]);
  });

  it('stream_error: the array stream gets 200 and the error as its only element', async () => {
    await start({ limitBytes: 1_000, style: 'stream_error' });
    const res = await send('streamGenerateContent', big, { sse: false });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([over]);
  });

  it('stream_error: a non-streaming request gets the 400', async () => {
    await start({ limitBytes: 1_000, style: 'stream_error' });
    expect(await refused(await send('generateContent', big))).toEqual(over);
  });

  it('errors on the array stream come as a one-element array', async () => {
    await start({ limitBytes: 1_000 });
    expect(await refused(await send('streamGenerateContent', big, { sse: false }))).toEqual([over]);
  });

  it('edge_413: nginx answers 413 before anything reads the body or the key', async () => {
    await start({ limitBytes: 1_000, style: 'edge_413' });
    const res = await send('streamGenerateContent', `{"contents": [${'x'.repeat(2_000)}`, { headers: { 'x-goog-api-key': '' } });
    expect(res.status).toBe(413);
    expect(res.headers.get('content-type')).toBe('text/html');
    expect(await res.text()).toBe(NGINX_413);
    expect(upstream.checks()).toEqual([{ refused: '413 Request Entity Too Large' }]);
  });

  it('countTokens counts past the window', async () => {
    await start({ limitBytes: 1_000 });
    expect(await (await send('countTokens', big)).json()).toEqual({ totalTokens: Math.ceil(bytes / 4) });
  });
});

describe('the summarizer', () => {
  const summarizer = { 'x-gateway-compaction': 'summarizer' };
  const transcript = { role: 'user', parts: [{ text: 'Summarise this conversation: ' }, { text: 'user: Review src/.' }] };

  it('answers a plain text summary, apart from the generate calls', async () => {
    await start();
    const answer: any = await (await send('generateContent', { contents: [transcript] }, { headers: summarizer })).json();
    expect(answer.candidates[0].content.parts).toEqual([{ text: 'SUMMARY of 47 chars: the user asked for a review of src/.' }]);
    expect(upstream.summarizerCalls()).toHaveLength(1);
    expect([upstream.generateCalls(), upstream.checks(), upstream.issued()]).toEqual([[], [], []]);
  });

  it('streams it when asked to', async () => {
    await start();
    const chunks = await events(await send('streamGenerateContent', { contents: [transcript] }, { headers: summarizer }));
    expect(chunks.map((c) => c.candidates[0].content.parts)).toEqual([
      [{ text: 'SUMMARY of 47 chars: the user asked for a review of src/.' }],
    ]);
  });

  it('is checked for the window like any other request', async () => {
    await start({ limitBytes: 100 });
    const body = JSON.stringify({ contents: [transcript] });
    expect(await refused(await send('generateContent', body, { headers: summarizer }))).toEqual(
      windowError(Math.ceil(body.length / 4), 25),
    );
  });
});

describe('the recorded Gemini CLI session', () => {
  const recorded = (file: string) => readFileSync(new URL(file, SESSION), 'utf8');
  const { path, ...headers } = JSON.parse(recorded('headers.json'));
  const [, url] = path.split(' ');

  it('its first request, as Gemini CLI sent it, is accepted', async () => {
    await start();
    const body = recorded('01-main.json');
    const res = await fetch(`${upstream.origin}${url}`, { method: 'POST', headers: { ...headers, 'x-goog-api-key': KEY }, body });
    const turn = await modelTurn(res, 'streamGenerateContent');
    expect(turn.parts.map((p: any) => Object.keys(p))).toEqual([['text'], ['functionCall', 'thoughtSignature']]);
    expect(upstream.checks()).toEqual([{ refused: null }]);
    expect(upstream.generateCalls()[0].body.toString('utf8')).toBe(body);
    expect(upstream.generateCalls()[0].headers['user-agent']).toBe(headers['user-agent']);
  });

  it.each(['02-main.json', '13-main.json'])('%s carries another stand-in’s signatures: 400 not valid', async (file) => {
    await start();
    const res = await fetch(`${upstream.origin}${url}`, {
      method: 'POST',
      headers: { ...headers, 'x-goog-api-key': KEY },
      body: recorded(file),
    });
    expect(await refused(res)).toEqual(NOT_VALID);
  });
});
