import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_MODEL_BYTES, ModelScanner, modelOfBody } from '../../src/routes/body-model.js';
import '../helpers/fast-check-seed.js';

// The model routing reads is the one the upstream's JSON parser reads: JSON.parse is the judge.

/** The scanner's answer for a body cut into chunks at the given offsets. */
function scan(body: string | Buffer, cuts: number[] = []): ReturnType<ModelScanner['result']> {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const scanner = new ModelScanner();
  let from = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    if (cut <= from || cut >= bytes.length) continue;
    scanner.write(bytes.subarray(from, cut));
    from = cut;
  }
  scanner.write(bytes.subarray(from));
  return scanner.result();
}

/** Every way of cutting a short body into two chunks, and into single bytes. */
function everyCut(body: string): Array<ReturnType<ModelScanner['result']>> {
  const length = Buffer.byteLength(body);
  const results = [
    scan(body),
    scan(
      body,
      Array.from({ length }, (_, i) => i),
    ),
  ];
  for (let cut = 1; cut < length; cut++) results.push(scan(body, [cut]));
  return results;
}

describe('the top-level model of a body', () => {
  it.each([
    ['first', '{"model":"qwen3","messages":[]}', 'qwen3'],
    ['after the conversation (the Python SDKs)', '{"messages":[{"role":"user","content":"hi"}],"model":"qwen3"}', 'qwen3'],
    ['last of duplicates', '{"model":"gpt-4.1","messages":[],"model":"qwen3"}', 'qwen3'],
    ['escaped key', '{"\\u006dodel":"qwen3"}', 'qwen3'],
    ['escaped value', '{"model":"qwen\\u0033"}', 'qwen3'],
    ['escaped solidus and quote', '{"model":"a\\/b\\"c"}', 'a/b"c'],
    ['non-ASCII', '{"model":"modèle-ü"}', 'modèle-ü'],
    ['whitespace everywhere', ' \n{ "messages" : [ ] ,\t"model" :\r\n "m" } \n', 'm'],
    ['a byte order mark', '\ufeff{"model":"m"}', 'm'],
    ['beside scalars', '{"stream":true,"n":-1.5e3,"x":null,"model":"m","t":false}', 'm'],
  ])('%s', (_name, body, model) => {
    expect(JSON.parse(body.replace(/^\ufeff/, '')).model).toBe(model);
    for (const result of everyCut(body)) expect(result).toBe(model);
  });

  it.each([
    ['nested in metadata', '{"metadata":{"model":"qwen3"},"messages":[]}'],
    ["in a tool's schema", '{"tools":[{"parameters":{"properties":{"model":{"type":"string"}}}}],"x":"model"}'],
    ['inside a string', '{"messages":[{"content":"{\\"model\\":\\"qwen3\\"}"}],"note":"\\"model\\":\\"qwen3\\""}'],
    ['a key that only ends in model', '{"my_model":"qwen3","modelx":"q","Model":"q"}'],
  ])('none when the only model is %s', (_name, body) => {
    expect(JSON.parse(body).model).toBeUndefined();
    for (const result of everyCut(body)) expect(result).toEqual({ unreadable: 'the body has no top-level "model"' });
  });

  it.each([
    ['a number', '{"model":3}'],
    ['an object', '{"model":{"name":"qwen3"}}'],
    ['null, last', '{"model":"qwen3","model":null}'],
    ['an invalid escape', '{"model":"qwen\\x"}'],
    ['a raw control character', '{"model":"qw\nen"}'],
    ['too long', `{"model":"${'m'.repeat(MAX_MODEL_BYTES + 1)}"}`],
  ])('unreadable when the model is %s', (_name, body) => {
    expect(scan(body)).toEqual({ unreadable: expect.stringContaining('is not a string') });
  });

  it.each([
    ['empty', ''],
    ['an array', '[{"model":"m"}]'],
    ['a string', '"model"'],
    ['cut short', '{"model":"m","messages":[{"role":"user"'],
    ['followed by more', '{"model":"m"} {"model":"n"}'],
    ['not JSON', 'model=qwen3'],
    ['gzip', '\x1f\x8b\x08\x00'],
    ['two values for a key', '{"model":"m" "n"}'],
  ])('unreadable when the body is %s', (_name, body) => {
    expect(scan(body)).toEqual({ unreadable: 'the body is not a JSON object' });
  });

  it('a string of escaped backslashes and quotes cut at every byte', () => {
    const body = JSON.stringify({ messages: [{ content: 'a\\"b\\\\"c\\\\\\' }], x: '\\', model: 'm\\"' });
    for (const result of everyCut(body)) expect(result).toBe('m\\"');
  });

  it('agrees with JSON.parse on any object, in any chunks', () => {
    const key = fc.oneof(fc.constantFrom('model', 'messages', 'metadata', 'Model', 'mode', 'models'), fc.string({ maxLength: 8 }));
    const value = fc.jsonValue({ maxDepth: 3 });
    const body = fc
      .tuple(
        fc.array(fc.tuple(key, value), { maxLength: 8 }),
        fc.constantFrom('model', 'qwen3-coder', 'gpt-4.1', 'a"b', 'π\\'),
        fc.nat(8),
        fc.boolean(),
      )
      .map(([members, model, at, escape]) => {
        const all = [...members];
        all.splice(Math.min(at, all.length), 0, ['model', model]);
        // Written by hand, so that a key may repeat and be escaped as a JSON writer never would.
        const text = `{${all.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`;
        return escape ? text.replaceAll('"model":', '"\\u006dodel":') : text;
      });
    fc.assert(
      fc.property(body, fc.array(fc.nat(4000), { maxLength: 6 }), (text, cuts) => {
        const expected = JSON.parse(text).model;
        const result = scan(text, cuts);
        if (typeof expected === 'string') expect(result).toBe(expected);
        else expect(typeof result).toBe('object');
      }),
      { numRuns: 400 },
    );
  });

  it('lets other work run while it reads a body of millions of keys in one buffer', async () => {
    const body = Buffer.from(`{"metadata":{${Array.from({ length: 3_000_000 }, (_, i) => `"k${i}":0`).join(',')}},"model":"m"}`);
    let turns = 0;
    const tick = () => {
      turns++;
      if (pending) setImmediate(tick);
    };
    let pending = true;
    setImmediate(tick);
    const model = await modelOfBody([body]);
    pending = false;
    expect(model).toBe('m');
    expect(turns).toBeGreaterThan(1);
  });

  it('reads a 10 MB conversation whose model comes last', async () => {
    const content = 'const s = "quoted \\"text\\"";\n'.repeat(10_000);
    const messages = Array.from({ length: 40 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content, metadata: { model: 'nested' } }));
    const body = Buffer.from(JSON.stringify({ messages, model: 'qwen3-coder' }));
    expect(body.length).toBeGreaterThan(10_000_000);
    const chunks = Array.from({ length: Math.ceil(body.length / 65_536) }, (_, i) => body.subarray(i * 65_536, (i + 1) * 65_536));
    expect(await modelOfBody(chunks)).toBe('qwen3-coder');
  });
});
