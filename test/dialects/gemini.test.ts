import { describe, expect, it } from 'vitest';
import { gemini } from '../../src/dialects/gemini.js';

/*
 * The Gemini dialect on its own: what each content is to compaction, what may be shortened (never
 * a model turn, whose thoughtSignatures must stay byte-exact), how kept turns go on the wire.
 */

const task = { role: 'user', parts: [{ text: 'Review src/.' }] };
const call = (id: string, signed = true) => ({
  role: 'model',
  parts: [
    { text: `reading ${id}` },
    { functionCall: { id, name: 'read_file', args: { file_path: `src/${id}.ts` } }, ...(signed ? { thoughtSignature: `sig-${id}` } : {}) },
  ],
});
const answer = (id: string, output = `contents of ${id}`) => ({
  role: 'user',
  parts: [{ functionResponse: { id, name: 'read_file', response: { output } } }],
});

describe('what each content is', () => {
  it('a model turn issues its calls; the user turn after it answers them, by id or else by name', () => {
    expect(gemini.describe(call('a'))).toEqual({ role: 'assistant', calls: ['a'], answers: [], joinsNext: false });
    expect(gemini.describe(answer('a'))).toEqual({ role: 'tool', calls: [], answers: ['a'], joinsNext: false });
    expect(gemini.describe({ role: 'user', parts: [{ functionResponse: { name: 'read_file', response: {} } }] }).answers).toEqual([
      'read_file',
    ]);
    expect(gemini.describe(task).role).toBe('user');
  });

  it('reads the conversation from contents; the rest of the request is not its business', () => {
    const request = { contents: [task, call('a'), answer('a')], systemInstruction: { parts: [{ text: 'rules' }] } };
    expect(gemini.read(request)!.items).toBe(request.contents);
    expect(gemini.read({ contents: [] })).toBeNull();
    expect(gemini.read({ contents: [{ role: 'user' }] })).toBeNull();
  });

  it('renders text, calls and tool output for the summarizer; thought parts are not read', () => {
    const thought = { role: 'model', parts: [{ text: 'secret reasoning', thought: true }, { text: 'visible' }] };
    expect(gemini.render(thought).text).toBe('visible');
    expect(gemini.render(call('a')).calls).toEqual([{ id: 'a', name: 'read_file', args: '{"file_path":"src/a.ts"}' }]);
    expect(gemini.render(answer('a', 'file text'))).toMatchObject({ who: 'tool result a', text: 'file text' });
  });
});

describe('what may be shortened', () => {
  it('a model turn, never: its thoughtSignature travels beside the parts', () => {
    expect(gemini.slots(call('a'))).toEqual([]);
    expect(gemini.slots({ role: 'model', parts: [{ text: 'x'.repeat(10_000) }] })).toEqual([]);
  });

  it('a user turn: its text, a tool output, inline media as a whole', () => {
    const image = { inlineData: { mimeType: 'image/png', data: 'A'.repeat(100) } };
    const turn = {
      role: 'user',
      parts: [{ text: 'hi' }, { functionResponse: { id: 'a', name: 'read_file', response: { output: 'long' } } }, image],
    };
    expect(gemini.slots(turn).map((s) => [s.kind, s.path])).toEqual([
      ['text', ['parts', 0, 'text']],
      ['text', ['parts', 1, 'functionResponse', 'response', 'output']],
      ['image', ['parts', 2]],
    ]);
  });
});

describe('on the wire', () => {
  it('a summary between user turns is merged into one, function responses first; model turns go as they are', () => {
    const summary = gemini.summaryItem('[compaction-gateway] summary', 'user') as { parts: unknown[] };
    const body = JSON.parse(
      gemini
        .write({ contents: [], generationConfig: { temperature: 1 }, futureField: 1 }, [task, summary, answer('b'), call('c'), answer('c')])
        .toString(),
    );
    expect(body.contents).toEqual([
      { role: 'user', parts: [answer('b').parts[0], task.parts[0], summary.parts[0]] },
      call('c'),
      answer('c'),
    ]);
    expect(body.generationConfig).toEqual({ temperature: 1 });
    expect(body.futureField).toBe(1);
  });

  it('problems: a function response not right after its call', () => {
    expect(gemini.problems([task, call('a'), answer('a')])).toEqual([]);
    expect(gemini.problems([task, answer('a')])).toEqual(['the functionResponse for "a" is not right after its functionCall']);
  });

  it('the completion limit is generationConfig.maxOutputTokens', () => {
    const request = { contents: [task], generationConfig: { maxOutputTokens: 8192, temperature: 1 } };
    expect(gemini.completion(request)).toBe(8192);
    expect(JSON.parse(gemini.withCompletion(request, 1000)!.toString()).generationConfig).toEqual({
      maxOutputTokens: 1000,
      temperature: 1,
    });
  });

  it('the summarizer: generateContent of the model, the key as x-goog-api-key, the text of the first candidate', () => {
    expect(gemini.summarizer.path('gemini-3.1-pro-preview')).toBe('/v1beta/models/gemini-3.1-pro-preview:generateContent');
    expect(gemini.summarizer.credential).toBe('x-goog-api-key');
    const answerBody = {
      candidates: [{ content: { role: 'model', parts: [{ text: 'thinking', thought: true }, { text: 'SUM' }, { text: 'MARY' }] } }],
    };
    expect(gemini.summarizer.text(answerBody)).toBe('SUMMARY');
    expect(gemini.summarizer.text({ candidates: [] })).toBeUndefined();
  });
});
