import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent, createClassifier } from '../../src/overlong/classify.js';
import { completionCrowdsOutPrompt, MIN_PROMPT_ROOM_TOKENS } from '../../src/overlong/numbers.js';

/** The general layer alone: a classifier with no specific rule. */
const generalOnly = createClassifier([]);

// When max_tokens leaves less than min(256, window/16) tokens (at least 1) for the prompt,
// compaction cannot help: lowering max_tokens is the fix. Pinned on both sides of the line.
const anthropic = (prompt: number, completion: number, limit: number) =>
  JSON.stringify({
    type: 'error',
    error: {
      type: 'invalid_request_error',
      message: `input length and \`max_tokens\` exceed context limit: ${prompt} + ${completion} > ${limit}, decrease input length or \`max_tokens\` and try again`,
    },
  });

describe('room left for the prompt', () => {
  it.each([
    // window, completion leaving room-1 (crowded), completion leaving exactly the room (not crowded)
    [200_000, 256],
    [2048, 128],
    [16, 1],
    [64, 4],
    // a sixteenth rounded down: 1000 / 16 = 62.5
    [1000, 62],
    // a completion as large as a tiny window fills it
    [8, 1],
  ])('a %i-token window needs %i tokens of room', (limit, room) => {
    expect(MIN_PROMPT_ROOM_TOKENS).toBe(256);
    const crowded = classifyResponse({ status: 400, body: anthropic(limit, limit - room + 1, limit) });
    expect(crowded).toEqual({ overlong: false, rule: 'completion_fills_window' });
    const fits = classifyResponse({ status: 400, body: anthropic(limit, limit - room, limit) });
    expect(fits).toMatchObject({ overlong: true, limits: { completionTokens: limit - room, limitTokens: limit } });
  });

  it('needs both a window and a completion, and a positive window', () => {
    expect(completionCrowdsOutPrompt({ limitTokens: 4096 })).toBe(false);
    expect(completionCrowdsOutPrompt({ completionTokens: 4096 })).toBe(false);
    expect(completionCrowdsOutPrompt({ limitTokens: 0, completionTokens: 10 })).toBe(false);
    expect(completionCrowdsOutPrompt({ limitTokens: -5, completionTokens: -5 })).toBe(false);
    expect(completionCrowdsOutPrompt({ limitTokens: 1, completionTokens: 1 })).toBe(true);
    expect(completionCrowdsOutPrompt({ limitTokens: 0, completionTokens: 0 })).toBe(false);
    expect(completionCrowdsOutPrompt({})).toBe(false);
  });

  it('draws the same line on TGI\u2019s wording, which keeps its own rule name on the overlong side', () => {
    // TGI's wording (fixture together-tgi-validation) with the numbers around the edge.
    const tgi = (limit: number, input: number, maxNew: number) =>
      classifyResponse({
        status: 422,
        body: JSON.stringify({
          error: `Input validation error: \`inputs\` tokens + \`max_new_tokens\` must be <= ${limit}. Given: ${input} \`inputs\` tokens and ${maxNew} \`max_new_tokens\``,
          error_type: 'validation',
        }),
      });
    expect(tgi(4096, 3900, 3840)).toMatchObject({ overlong: true, rule: 'tgi_inputs_plus_max_new_tokens' });
    expect(tgi(4096, 3900, 3841)).toEqual({ overlong: false, rule: 'completion_fills_window' });
  });

  it('does not apply to a body-size rejection', () => {
    const body = JSON.stringify({ error: { type: 'request_too_large', message: 'request too large: 100 + 4096 > 4096' } });
    expect(classifyResponse({ status: 400, body })).toMatchObject({ overlong: true, reason: 'body_too_large' });
  });
});

describe('inputs that break the declared types get exact answers', () => {
  it('a status that is not an integer counts as none', () => {
    const body = JSON.stringify({ error: { message: 'prompt is too long: 300000 tokens > 200000 maximum' } });
    expect(classifyResponse({ status: 400.5, body })).toMatchObject({ overlong: true });
    expect(classifyResponse({ status: Number.NaN, body })).toMatchObject({ overlong: true });
    expect(classifyResponse({ status: 429.5, body: 'x' })).toEqual({ overlong: false, rule: 'no_error_object' });
    expect(classifyResponse({ status: 413.2, body: '' })).toEqual({ overlong: false, rule: 'no_error_object' });
  });

  it('a body that is not a string counts as empty', () => {
    expect(classifyResponse({ status: 413, body: 42 as unknown as string })).toEqual({
      overlong: true,
      reason: 'body_too_large',
      limits: {},
      rule: 'status_413',
    });
    expect(classifyStreamEvent(42 as unknown as string)).toEqual({ overlong: false, rule: 'no_error_marker' });
    expect(classifyResponse(null as unknown as { status: number; body: string })).toEqual({ overlong: false, rule: 'classifier_failed' });
  });

  it('an empty or plain-text error body is read as the error itself', () => {
    expect(generalOnly.classifyResponse({ status: 400, body: 'The prompt is too long.' })).toMatchObject({ overlong: true });
    expect(generalOnly.classifyResponse({ status: 200, body: 'The prompt is too long.' })).toEqual({
      overlong: false,
      rule: 'no_error_object',
    });
    expect(generalOnly.classifyStreamEvent('error: the prompt is too long')).toMatchObject({ overlong: true });
    expect(classifyStreamEvent('warning: the prompt is too long')).toEqual({ overlong: false, rule: 'no_error_object' });
  });
});
