import { describe, expect, it } from 'vitest';
import { hasInlineData, isRecord, partsText, pickHeaders, positiveInt, str, withField } from '../../src/dialects/parts.js';

describe('the shared readers', () => {
  it('isRecord: a plain object, not null or an array', () => {
    expect(isRecord({})).toBe(true);
    expect(isRecord(null)).toBe(false);
    expect(isRecord([])).toBe(false);
    expect(isRecord('x')).toBe(false);
  });

  it('str and positiveInt', () => {
    expect(str('a')).toBe('a');
    expect(str(1)).toBeUndefined();
    expect(positiveInt(1)).toBe(1);
    expect(positiveInt(0)).toBeUndefined();
    expect(positiveInt(-3)).toBeUndefined();
    expect(positiveInt(2.5)).toBeUndefined();
    expect(positiveInt('4')).toBeUndefined();
  });

  it('withField sets one field where it was, or adds it last', () => {
    expect(withField({ a: 1, b: 2, c: 3 }, 'b', 9).toString()).toBe('{"a":1,"b":9,"c":3}');
    expect(withField({ a: 1 }, 'z', 'x').toString()).toBe('{"a":1,"z":"x"}');
  });

  it('pickHeaders copies the named single-valued headers only', () => {
    expect(
      pickHeaders({ 'x-api-key': 'k', 'anthropic-version': ['a', 'b'], other: 'o' }, ['x-api-key', 'anthropic-version', 'missing']),
    ).toEqual({ 'x-api-key': 'k' });
  });
});

describe('hasInlineData: an image whose bytes are in the request', () => {
  it('a data: URL, or a string over 1 KiB, anywhere a few levels down', () => {
    expect(hasInlineData('data:image/png;base64,AA')).toBe(true);
    expect(hasInlineData('x'.repeat(1025))).toBe(true);
    expect(hasInlineData('x'.repeat(1024))).toBe(false);
    expect(hasInlineData('https://example.com/a.png')).toBe(false);
    expect(hasInlineData({ type: 'image', source: { type: 'base64', data: 'x'.repeat(2000) } })).toBe(true);
    expect(hasInlineData({ a: { b: { c: 'data:x' } } })).toBe(true);
  });

  it('looks four levels into an object and no deeper', () => {
    expect(hasInlineData({ a: { b: { c: { d: 'data:x' } } } })).toBe(true);
    expect(hasInlineData({ a: { b: { c: { d: { e: 'data:x' } } } } })).toBe(false);
  });

  it('numbers, nulls and lists are no inline data', () => {
    expect(hasInlineData(5)).toBe(false);
    expect(hasInlineData(null)).toBe(false);
    expect(hasInlineData(['data:x'])).toBe(false);
    expect(hasInlineData({ url: 'https://x' })).toBe(false);
  });
});

describe('partsText: the texts of a content value', () => {
  it('a string as it is; nothing for null or absent; other values as JSON', () => {
    expect(partsText('abc')).toBe('abc');
    expect(partsText(null)).toBe('');
    expect(partsText(undefined)).toBe('');
    expect(partsText({ a: 1 })).toBe('{"a":1}');
    expect(partsText(12)).toBe('12');
  });

  it('parts: strings, texts and refusals one per line; media as a short marker; the rest nothing', () => {
    const content = [
      'plain',
      { type: 'text', text: 'hello' },
      { type: 'refusal', refusal: 'no' },
      { type: 'image_url', image_url: { url: 'data:...' } },
      { type: 'input_audio', input_audio: {} },
      { type: 'input_file', file_id: 'f' },
      { type: 'document', source: {} },
      { type: 'tool_use', id: 'x' },
      { type: 'text', text: '' },
      { noType: true },
      { type: ['image'] },
      7,
      null,
    ];
    expect(partsText(content)).toBe('plain\nhello\nno\n[image_url]\n[input_audio]\n[input_file]\n[document]');
  });
});
