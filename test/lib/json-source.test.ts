import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TOO_MANY_ITEMS, derive, parseObject, parseObjectNow, sourceText, writeDerived } from '../../src/lib/json-source.js';

/** JSON text of objects, written with random whitespace between tokens, as clients write it. */
const spaced = (value: unknown, space: string): string => JSON.stringify(value, null, space);

describe('parseObject: a request body read field by field', () => {
  it('gives what JSON.parse gives, for any object, compact or indented', async () => {
    await fc.assert(
      fc.asyncProperty(fc.dictionary(fc.string(), fc.jsonValue()), fc.constantFrom('', ' ', '\t', '  \n'), async (object, space) => {
        const text = spaced(object, space);
        const expected = JSON.parse(text);
        expect(parseObjectNow(text, 1000)).toEqual(expected);
        expect(await parseObject(text, 1000)).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('says null for what JSON.parse refuses, or is not an object', async () => {
    for (const text of [
      '',
      ' ',
      '[1,2]',
      '"x"',
      '12',
      'null',
      '{',
      '{"a":}',
      '{"a":1,}',
      '{"a":[1,]}',
      '{"a":[1}',
      '{"a" 1}',
      '{"a":1} x',
      '{"a":"\\q"}',
      '{"a":tru}',
      '\ufeff{}',
      '{"a":"x}',
      '{"a":[{"b":1]}]}',
    ]) {
      expect(parseObjectNow(text, 100), text).toBeNull();
      expect(await parseObject(text, 100), text).toBeNull();
    }
  });

  it('keeps JSON.parse semantics for duplicate keys and __proto__', () => {
    const parsed = parseObjectNow('{"a":1,"__proto__":{"polluted":true},"a":2}', 10)!;
    expect(parsed).toEqual(JSON.parse('{"a":1,"__proto__":{"polluted":true},"a":2}'));
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.keys(parsed)).toEqual(['a', '__proto__']);
  });

  it('refuses nesting deeper than the limit (the root counts 1), in fields and in array elements', () => {
    const nest = (n: number) => '['.repeat(n) + ']'.repeat(n);
    expect(parseObjectNow(`{"a":${nest(9)}}`, 10)).not.toBeNull();
    expect(parseObjectNow(`{"a":${nest(10)}}`, 10)).toBeNull();
    expect(parseObjectNow(`{"a":[${nest(8)}]}`, 10)).not.toBeNull();
    expect(parseObjectNow(`{"a":[${nest(9)}]}`, 10)).toBeNull();
    // Brackets inside strings are text.
    expect(parseObjectNow(`{"a":["${'['.repeat(50)}"]}`, 3)).toEqual({ a: ['['.repeat(50)] });
    // A hundred thousand levels: refused, not a stack overflow.
    expect(parseObjectNow(`{"a":${nest(100_000)}}`, 256)).toBeNull();
  });

  it('yields to other work while it reads a long array', async () => {
    const text = JSON.stringify({ messages: Array.from({ length: 200_000 }, (_, i) => ({ role: 'user', content: `turn ${i}` })) });
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const parsed = await parseObject(text, 10);
    clearInterval(timer);
    expect((parsed as Record<string, unknown[]>).messages.length).toBe(200_000);
    // Without pauses the interval cannot run at all while the parse holds the event loop.
    expect(ticks).toBeGreaterThan(0);
  });

  it('stops at a top-level array longer than maxItems, reading nothing after it', async () => {
    const turns = (n: number) => Array.from({ length: n }, (_, i) => ({ role: 'user', content: `turn ${i}` }));
    expect(
      ((await parseObject(JSON.stringify({ messages: turns(5), model: 'm' }), 10, 5)) as Record<string, unknown[]>).messages,
    ).toHaveLength(5);
    expect(await parseObject(JSON.stringify({ model: 'm', messages: turns(6) }), 10, 5)).toBe(TOO_MANY_ITEMS);
    // What follows the sixth element is never read: not even text JSON.parse would refuse.
    const cut = JSON.stringify({ messages: turns(6) }).replace(/\]\}$/, ',{"broken": ]');
    expect(await parseObject(cut, 10, 5)).toBe(TOO_MANY_ITEMS);
    expect(await parseObject(cut, 10)).toBeNull();
  });
});

describe('writeDerived: a rewritten request keeps every untouched byte', () => {
  const body =
    '{ "model": "m", "seed": 12345678901234567890, "temperature": 1.0, "messages": [ {"role": "user",  "content": "a"}, {"role":"assistant","content":"b", "n": 1e2} ], "extra": {"x": 1.50} }';

  it('copies the source text of fields and elements that are still the values parsed', () => {
    const request = parseObjectNow(body, 100)!;
    const messages = request.messages as unknown[];
    const summary = { role: 'user', content: 'SUMMARY' };
    const text = writeDerived(request, { messages: [summary, messages[1]] });
    expect(text).toBe(
      '{"model":"m","seed":12345678901234567890,"temperature":1.0,"messages":[{"role":"user","content":"SUMMARY"},{"role":"assistant","content":"b", "n": 1e2}],"extra":{"x": 1.50}}',
    );
    expect(JSON.parse(text)).toEqual({ ...JSON.parse(body), messages: [summary, JSON.parse(body).messages[1]] });
    expect(sourceText(messages[0])).toBe('{"role": "user",  "content": "a"}');
  });

  it('serialises a changed field, and a new one after the others, as JSON.stringify would', () => {
    const request = parseObjectNow(body, 100)!;
    const text = writeDerived(request, { temperature: 0.5, max_tokens: 10 });
    expect(JSON.parse(text)).toEqual({ ...JSON.parse(body), temperature: 0.5, max_tokens: 10 });
    expect(text).toContain('"seed":12345678901234567890');
    expect(text.endsWith('"max_tokens":10}')).toBe(true);
    // A field set to undefined is left out.
    expect(JSON.parse(writeDerived(request, { extra: undefined }))).not.toHaveProperty('extra');
  });

  it('writes an element edited in place from its value, never from stale text', () => {
    const request = parseObjectNow(body, 100)!;
    const messages = request.messages as Array<Record<string, unknown>>;
    messages.push({ role: 'user', content: 'new' });
    expect(JSON.parse(writeDerived(request)).messages).toHaveLength(3);
  });

  it('a derived request (an opt-in added) still writes from the source', () => {
    const request = parseObjectNow(body, 100)!;
    const derived = derive(request, { thinking: { type: 'enabled' } });
    expect(writeDerived(derived)).toContain('"seed":12345678901234567890,"temperature":1.0');
    expect(JSON.parse(writeDerived(derived)).thinking).toEqual({ type: 'enabled' });
  });

  it('an object that was never parsed is written as JSON.stringify writes it', () => {
    const plain = { model: 'm', messages: [{ role: 'user', content: 'x' }] };
    expect(writeDerived(plain)).toBe(JSON.stringify(plain));
  });
});
