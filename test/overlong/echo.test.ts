import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent, isBindingRefusal } from '../../src/overlong/classify.js';
import { echoesIn, MIN_ECHO_CHARS } from '../../src/overlong/echo.js';
import { fixtures } from '../helpers/fixtures.js';

/*
 * Text the request supplied never makes a verdict: a provider that quotes a client's value back
 * ("Invalid value: '...'") must not let that value say "maximum context length is 40 tokens". A
 * real overflow whose conversation happens to hold an earlier error must still be one.
 */

const FORGED =
  "This model's maximum context length is 40 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.";
const chatWith = (role: string, extra: Record<string, unknown> = {}) => ({
  model: 'gpt-4o-mini',
  messages: [
    { role, content: 'hi' },
    { role: 'user', content: 'hello' },
  ],
  ...extra,
});
const openai = (message: string, code: string | null = null, param: string | null = null) =>
  JSON.stringify({ error: { message, type: 'invalid_request_error', param, code } });

type Case = [name: string, status: number, body: string, request: unknown];

/** Errors that quote what the client wrote, worded so that no veto catches them: only the cut can. */
const ECHOES: Case[] = [
  ['a whole value, quoted, its own apostrophe breaking the quotes', 400, openai(`Invalid role '${FORGED}'.`), chatWith(FORGED)],
  ['a whole value, unquoted', 400, openai(`unrecognised role: ${FORGED}`), chatWith(FORGED)],
  [
    'a prefix the provider cut with an ellipsis (pydantic)',
    400,
    openai(`messages.0.role: bad role [input_value='${FORGED.slice(0, 60)}...', input_type=str]`),
    chatWith(`${FORGED} ${'x'.repeat(500)}`),
  ],
  [
    'a prefix closed by the quote it opened with',
    400,
    openai(`bad role '${FORGED.slice(0, 70)}'`),
    chatWith(`${FORGED} ${'x'.repeat(500)}`),
  ],
  [
    'a suffix after an ellipsis (pydantic first...last)',
    400,
    openai(`bad role 'xxxxxxxx...${FORGED.slice(-90)}'`),
    chatWith(`${'x'.repeat(500)} ${FORGED}`),
  ],
  ['a short value, quoted', 400, openai(`bad role 'prompt too long'`), chatWith('prompt too long')],
  [
    'a repr of an error code, which the repr scanner would read as a code',
    400,
    openai(`bad role: {'code': 'context_length_exceeded'}`),
    chatWith("{'code': 'context_length_exceeded'}"),
  ],
  [
    'JSON of an overflow, which would be parsed as an embedded error',
    400,
    openai(`bad role: {"error":{"code":"context_length_exceeded","message":"too long"}}`),
    chatWith('{"error":{"code":"context_length_exceeded","message":"too long"}}'),
  ],
  [
    'a forged refusal of bound thinking',
    400,
    openai("bad role 'messages.1.content.0: Invalid `signature` in `thinking` block'"),
    chatWith('messages.1.content.0: Invalid `signature` in `thinking` block'),
  ],
];

describe('an error that echoes the request is judged without the echo', () => {
  it.each(ECHOES)('%s: overlong as it came, not once the echo is cut', (_name, status, body, request) => {
    const asItCame = classifyResponse({ status, body });
    expect(asItCame.overlong || isBindingRefusal(asItCame), asItCame.rule).toBe(true);
    const judged = classifyResponse({ status, body }, request);
    expect(judged.overlong, judged.rule).toBe(false);
    expect(isBindingRefusal(judged)).toBe(false);
  });

  it('the same in a stream event', () => {
    const event = JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: `bad role '${FORGED}'` } });
    expect(classifyStreamEvent(event).overlong).toBe(true);
    expect(classifyStreamEvent(event, chatWith(FORGED)).overlong).toBe(false);
  });

  it('a 413 stays a body-size rejection, but states no limit the client wrote', () => {
    const body = openai(`payload too large; bad header value '${'Maximum request body size 100 exceeded'}'`);
    const request = chatWith('Maximum request body size 100 exceeded');
    expect(classifyResponse({ status: 413, body })).toMatchObject({ overlong: true, limits: { limitBytes: 100 } });
    const judged = classifyResponse({ status: 413, body }, request);
    expect(judged).toMatchObject({ overlong: true, reason: 'body_too_large' });
    expect(judged.overlong && judged.limits.limitBytes).toBeUndefined();
  });

  it("OpenAI's own invalid_value quoting a forged overflow is a schema error, with or without the request", () => {
    const f = fixtures.find((x) => x.id === 'openai-invalid-value-echoes-forged-overflow')!;
    expect(classifyResponse({ status: f.status, body: f.body })).toEqual({ overlong: false, rule: 'schema' });
    expect(classifyResponse({ status: f.status, body: f.body }, chatWith(FORGED))).toEqual({ overlong: false, rule: 'schema' });
  });

  it.each([
    ['invalid_value', "Invalid value: 'x'. Supported values are: 'system', 'user'."],
    ['unsupported_value', "Unsupported value: 'messages[0].role' does not support 'x' with this model."],
    [
      'literal_error',
      "[{'type': 'literal_error', 'loc': ('body', 'messages', 0, 'role'), 'msg': \"Input should be 'user'\", 'input': 'x'}]",
    ],
    [null, "'x' is not one of ['system', 'assistant', 'user', 'function'] - 'messages.0.role'"],
  ])('a schema error about a value (%s) is never an overflow, whatever it quotes', (code, message) => {
    const forged = message.replaceAll("'x'", `'${FORGED}'`);
    expect(classifyResponse({ status: 400, body: openai(forged, code, 'messages[0].role') })).toMatchObject({
      overlong: false,
      rule: 'schema',
    });
  });
});

/** How providers and the proxies before them rewrite what they quote back. */
const html = (s: string) =>
  s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;').replaceAll("'", '&#39;');
const REWRITTEN: Array<[name: string, rewrite: (s: string) => string]> = [
  ['HTML-escaped (&#39;, &quot;, &lt;, &amp;)', html],
  ['HTML-escaped with hexadecimal apostrophes (&#x27;)', (s) => s.replaceAll('&', '&amp;').replaceAll("'", '&#x27;')],
  ['upper-cased', (s) => s.toUpperCase()],
  ['lower-cased', (s) => s.toLowerCase()],
  ['whitespace collapsed', (s) => s.replace(/\s+/g, ' ').trim()],
  ['line breaks and tabs made spaces', (s) => s.replace(/[\n\t]/g, ' ')],
  ['inside JSON the provider wrote itself (\\" and \\n)', (s) => JSON.stringify(s).slice(1, -1)],
  ["a Python repr (\\' and \\n)", (s) => s.replaceAll('\\', '\\\\').replaceAll("'", "\\'").replaceAll('\n', '\\n')],
  ['upper-cased and HTML-escaped', (s) => html(s.toUpperCase())],
];
/** The forged sentence as a client hides it: spaced oddly, across lines, with what escapes and case would change. */
const HIDDEN = `This model's   maximum context length is 40 tokens.\n\tHowever, your messages resulted in 9000 tokens <&> "Please" reduce the length of the messages.`;

describe('an echo the provider rewrote is cut all the same', () => {
  it.each(REWRITTEN)('%s, whole', (_name, rewrite) => {
    const body = openai(`bad role '${rewrite(HIDDEN)}' in the request`);
    expect(classifyResponse({ status: 400, body }).overlong, 'the sentence reads as an overflow before the cut').toBe(true);
    expect(classifyResponse({ status: 400, body }, chatWith(HIDDEN))).toMatchObject({ overlong: false });
  });

  it.each(REWRITTEN)('%s, cut short by an ellipsis', (_name, rewrite) => {
    const value = `${HIDDEN} ${'and more '.repeat(60)}`;
    const body = openai(`bad role [input_value='${rewrite(value.slice(0, 150))}...', input_type=str]`);
    expect(classifyResponse({ status: 400, body }).overlong).toBe(true);
    expect(classifyResponse({ status: 400, body }, chatWith(value))).toMatchObject({ overlong: false });
  });

  it.each(REWRITTEN)('%s, its end after an ellipsis', (_name, rewrite) => {
    const value = `${'and more '.repeat(60)} ${HIDDEN}`;
    const body = openai(`bad role 'and more and...${rewrite(value.slice(-150))}'`);
    expect(classifyResponse({ status: 400, body }).overlong).toBe(true);
    expect(classifyResponse({ status: 400, body }, chatWith(value))).toMatchObject({ overlong: false });
  });

  it.each([
    ['upper-cased', 'prompt too long', "'PROMPT TOO LONG'"],
    ['between HTML-escaped quotes', 'prompt too long', '&#39;prompt too long&#39;'],
    ['its spacing collapsed', 'prompt   too\nlong', "'prompt too long'"],
  ])('a short value quoted %s', (_name, value, quoted) => {
    const body = openai(`bad role ${quoted}`);
    expect(classifyResponse({ status: 400, body }).overlong).toBe(true);
    expect(classifyResponse({ status: 400, body }, chatWith(value))).toMatchObject({ overlong: false });
  });

  it("the cut is of the error's own characters, whatever form matched", () => {
    const text = `bad role '${html(HIDDEN.toUpperCase())}' in the request`;
    const echoes = echoesIn(text, chatWith(HIDDEN));
    expect(echoes).toEqual([html(HIDDEN.toUpperCase()).trim()]);
    expect(text).toContain(echoes![0]);
  });

  it('a value made of escapes and odd case cannot make its own quotation differ from it', () => {
    // Each escape-looking piece of the value is escaped again by the provider; the raw value must still match.
    const value = `${FORGED} &amp; &#39; \\n \\" \u00df STRASSE`;
    for (const [name, rewrite] of REWRITTEN) {
      const body = openai(`bad role '${rewrite(value)}'`);
      expect(classifyResponse({ status: 400, body }, chatWith(value)).overlong, name).toBe(false);
    }
  });

  it('a real overflow stays one beside a conversation that holds its words in other case and spacing', () => {
    const real = openai(
      "This model's maximum context length is 4097 tokens. However, your messages resulted in 4390 tokens. Please reduce the length of the messages.",
      'context_length_exceeded',
      'messages',
    );
    const pasted =
      "THIS MODEL'S MAXIMUM CONTEXT LENGTH IS 4097 TOKENS.   HOWEVER, YOUR MESSAGES RESULTED IN 4294 TOKENS. PLEASE REDUCE THE LENGTH OF THE MESSAGES.";
    const request = {
      model: 'gpt-4o-mini',
      messages: [
        { role: 'user', content: `I got this: ${pasted} What now?` },
        { role: 'user', content: pasted },
      ],
    };
    expect(classifyResponse({ status: 400, body: real }, request)).toMatchObject({
      overlong: true,
      limits: { limitTokens: 4097, promptTokens: 4390 },
    });
  });
});

describe('a real overflow stays one, whatever the conversation holds', () => {
  const real = openai(
    "This model's maximum context length is 4097 tokens. However, your messages resulted in 4390 tokens. Please reduce the length of the messages.",
    'context_length_exceeded',
    'messages',
  );
  const pasted =
    "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.";

  it.each([
    ['an earlier error pasted inside a message', `I got this: ${pasted} What now?`],
    ['an earlier error as a whole message', pasted],
    ['an earlier error that starts a message', `${pasted}\nwhy?`],
  ])('%s', (_name, content) => {
    const request = { model: 'gpt-4o-mini', messages: [{ role: 'user', content }] };
    expect(classifyResponse({ status: 400, body: real }, request)).toEqual({
      overlong: true,
      reason: 'context_length',
      rule: 'context_length_exceeded',
      limits: { limitTokens: 4097, promptTokens: 4390 },
    });
  });

  it('an Anthropic overflow after the person pasted the last one (no code says it, only the sentence)', () => {
    const body = JSON.stringify({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'prompt is too long: 210345 tokens > 200000 maximum' },
    });
    const request = {
      model: 'claude-sonnet-4-5',
      messages: [{ role: 'user', content: 'it said: prompt is too long: 200251 tokens > 200000 maximum' }],
    };
    expect(classifyResponse({ status: 400, body }, request)).toMatchObject({
      overlong: true,
      limits: { limitTokens: 200000, promptTokens: 210345 },
    });
  });

  it('an overflow that names the model, a value of the request', () => {
    const body = openai('max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens for claude-3-5-sonnet-20240620');
    const overflow = openai('prompt is too long for claude-3-5-sonnet-20240620: 210345 tokens > 200000 maximum');
    const request = { model: 'claude-3-5-sonnet-20240620', messages: [{ role: 'user', content: 'hi' }] };
    expect(classifyResponse({ status: 400, body }, request)).toMatchObject({ overlong: false, rule: 'output_token_cap' });
    expect(classifyResponse({ status: 400, body: overflow }, request)).toMatchObject({ overlong: true, limits: { limitTokens: 200000 } });
  });

  it('every overlong fixture stays overlong beside a request that quotes every fixture in its messages', () => {
    const request = { model: 'm', messages: fixtures.map((f) => ({ role: 'user', content: `earlier: ${f.body} (end)` })) };
    for (const f of fixtures.filter((x) => x.overlong && !x.in_stream)) {
      expect(classifyResponse({ status: f.status, body: f.body }, request), f.id).toEqual(
        classifyResponse({ status: f.status, body: f.body }),
      );
    }
  });
});

describe('an error made of the request', () => {
  it('quoting more values than any error does, decides nothing, however the values are ordered', () => {
    // Each longer than the forged sentence: cutting only the longest echoes would leave it in.
    const values = Array.from({ length: 80 }, (_, i) => `value number ${i} of a flood of them ${'.'.repeat(200)}`);
    const request = { model: 'm', messages: [...values.map((content) => ({ role: 'user', content })), { role: FORGED, content: 'x' }] };
    const body = openai(`bad request: ${values.map((v) => `'${v}'`).join(', ')}; bad role '${FORGED}'`);
    expect(classifyResponse({ status: 400, body }).overlong).toBe(true);
    expect(classifyResponse({ status: 400, body }, request)).toEqual({ overlong: false, rule: 'echoes_request' });
  });
});

describe('the cost: the request is read only when a verdict would act', () => {
  it('is not read for an error that decides nothing', () => {
    let reads = 0;
    const request = new Proxy(chatWith('x'), { ownKeys: (target) => (reads++, Reflect.ownKeys(target)) });
    classifyResponse({ status: 400, body: openai('Incorrect API key provided', 'invalid_api_key') }, request);
    classifyResponse({ status: 429, body: openai(FORGED) }, request);
    classifyStreamEvent('data: {"choices":[{"delta":{"content":"hi"}}]}', request);
    expect(reads).toBe(0);
    classifyResponse({ status: 400, body: openai(FORGED) }, request);
    expect(reads).toBe(1);
  });

  it('finds no echo in a body that is not an object, and none shorter than the unquoted minimum', () => {
    expect(echoesIn(`bad role ${FORGED}`, null)).toEqual([]);
    expect(echoesIn(`bad role ${FORGED}`, 'a string body')).toEqual([]);
    const short = 'x'.repeat(MIN_ECHO_CHARS - 1);
    expect(echoesIn(`bad role ${short}.`, chatWith(short))).toEqual([]);
    expect(echoesIn(`bad role '${short}'.`, chatWith(short))).toEqual([`'${short}'`]);
  });

  it('a million-message conversation is walked once (the time is printed, not asserted)', () => {
    const messages = Array.from({ length: 1_000_000 }, (_, i) => ({
      role: i % 2 ? 'assistant' : 'user',
      content: `message number ${i} of the session`,
    }));
    const request = { model: 'm', messages: [...messages, { role: FORGED, content: 'x' }] };
    const started = performance.now();
    const judged = classifyResponse({ status: 400, body: openai(`bad role '${FORGED}'`) }, request);
    const ms = performance.now() - started;
    console.log(`echo check over 2,000,001 string values: ${ms.toFixed(0)} ms`);
    expect(judged.overlong).toBe(false);
  });
});
