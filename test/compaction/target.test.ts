import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clampedCompletion, fitFor, learnedTarget, sizeTarget, smallest, type Bounds, type Rejection, type SizeTarget } from '../../src/compaction/target.js';
import { classifyResponse } from '../../src/overlong/classify.js';
import type { StatedLimits } from '../../src/overlong/types.js';

/** A target as the compaction uses it, without the bounds it carries for sizing other calls (and whether they are exact). */
const plain = (t: SizeTarget | null) => {
  if (!t) return t;
  const { bounds: _bounds, exact: _exact, ...rest } = t;
  return rest;
};

const RATIO = 0.6;

/** The limits the classifier reads off a real 400 body. */
function statedBy(message: string, shape: 'openai' | 'anthropic'): StatedLimits {
  const body = shape === 'openai'
    ? { error: { message, type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } }
    : { type: 'error', error: { type: 'invalid_request_error', message } };
  const verdict = classifyResponse({ status: 400, contentType: 'application/json', body: JSON.stringify(body) });
  if (!verdict.overlong) throw new Error(`not overlong: ${verdict.rule}`);
  return verdict.limits;
}

const contextLength = (limits: StatedLimits, bodyBytes: number, requested?: number): Rejection => ({ reason: 'context_length', limits, bodyBytes, requested });
const tooLarge = (limits: StatedLimits, bodyBytes: number): Rejection => ({ reason: 'body_too_large', limits, bodyBytes, requested: undefined });

// 400 KB rejected at 100,000 tokens: 4 bytes a token; a 64,000-token window; max_tokens 32,000.
const windowOnly = statedBy("This model's maximum context length is 64000 tokens. However, your messages resulted in 100000 tokens. Please reduce the length of the messages.", 'openai');
const withCompletion = statedBy('input length and `max_tokens` exceed context limit: 100000 + 32000 > 120000, decrease input length or `max_tokens` and try again', 'anthropic');

describe('sizeTarget after a context-length 400', () => {
  it('does not subtract max_tokens when the error states the window but not the completion', () => {
    expect(windowOnly).toMatchObject({ limitTokens: 64_000, promptTokens: 100_000 });
    const t = sizeTarget(contextLength(windowOnly, 400_000, 32_000), undefined, RATIO);
    expect(plain(t)).toEqual({ fitBytes: Math.floor(64_000 * 4 * 0.9), aimBytes: Math.floor(64_000 * 4 * RATIO), bytesPerToken: 4, tokensBefore: 100_000, source: 'stated' });
  });

  it('subtracts the requested completion when the error counts it ("A + B > C")', () => {
    expect(withCompletion).toMatchObject({ promptTokens: 100_000, completionTokens: 32_000, limitTokens: 120_000 });
    const t = sizeTarget(contextLength(withCompletion, 400_000, 32_000), undefined, RATIO);
    expect(t.fitBytes).toBe(Math.floor((120_000 - 32_000) * 4 * 0.9));
    expect(t.aimBytes).toBe(Math.floor((120_000 - 32_000) * 4 * RATIO));
  });

  it('never aims above 80% of the rejected body, and never fits at or above it, whatever the numbers', () => {
    const t = sizeTarget(contextLength({ limitTokens: 2_000_000, promptTokens: 1_000_000 }, 4_000_000), undefined, 0.95);
    expect(t.aimBytes).toBe(3_200_000);
    expect(t.fitBytes).toBe(3_999_999);
  });

  it('with no numbers: the refused size is the bound (a context error too): 90% of it fits, the aim is its share', () => {
    expect(plain(sizeTarget(contextLength({}, 1_000_000), undefined, RATIO))).toMatchObject({ fitBytes: 900_000, aimBytes: 600_000, source: 'learned', bytesPerToken: 3 });
  });
});

describe('sizeTarget after a 413', () => {
  it('fits under a stated body limit and aims at a share of it', () => {
    const t = sizeTarget(tooLarge({ limitBytes: 1_048_576 }, 3_000_000), undefined, RATIO);
    expect(t).toMatchObject({ fitBytes: Math.floor(1_048_576 * 0.98), aimBytes: Math.floor(1_048_576 * RATIO), source: 'stated' });
  });

  it('without a stated limit: below the refused size, aiming under 1 MiB (or a tenth of a huge request)', () => {
    const seven = sizeTarget(tooLarge({}, 7_000_000), undefined, RATIO);
    expect(seven.fitBytes).toBe(6_300_000);
    expect(seven.aimBytes).toBe(Math.floor(0.9 * 1024 * 1024));
    expect(sizeTarget(tooLarge({}, 100_000_000), undefined, RATIO).aimBytes).toBe(10_000_000);
    const small = sizeTarget(tooLarge({}, 1_000), undefined, RATIO);
    expect(small.fitBytes).toBe(900);
    expect(small.aimBytes).toBe(600);
  });
});

describe('learned bounds', () => {
  it('a refused size learned from a 413 tightens a later target, and alone gives a learned target below it', () => {
    const t = sizeTarget(contextLength({}, 1_000_000), { refusedBytes: 500_000 }, RATIO);
    expect(t).toMatchObject({ fitBytes: 450_000, aimBytes: 300_000, source: 'learned' });
    const ahead = learnedTarget(2_000_000, { refusedBytes: 500_000 }, RATIO, undefined);
    expect(ahead!.fitBytes).toBeLessThan(500_000);
    expect(plain(learnedTarget(2_000_000, {}, RATIO, undefined))).toBeNull();
  });

  it('a looser learned bound never loosens what this error states', () => {
    const loose: Bounds = { limitBytes: 10_000_000, refusedBytes: 9_000_000 };
    expect(plain(sizeTarget(contextLength(windowOnly, 400_000, 32_000), loose, RATIO))).toEqual(plain(sizeTarget(contextLength(windowOnly, 400_000, 32_000), undefined, RATIO)));
  });

  it('a window this error states replaces a learned one, looser or tighter: the error is the truth now', () => {
    const stated = plain(sizeTarget(contextLength(windowOnly, 400_000, 32_000), undefined, RATIO));
    for (const limitTokens of [1_000_000, 16_000]) {
      expect(plain(sizeTarget(contextLength(windowOnly, 400_000, 32_000), { limitTokens, completionCounted: true }, RATIO))).toEqual(stated);
    }
  });

  it('a learned body limit tightens a rejection that states none', () => {
    const t = sizeTarget(tooLarge({}, 3_000_000), { limitBytes: 1_000_000 }, RATIO);
    expect(t.fitBytes).toBe(980_000);
    expect(t.aimBytes).toBe(600_000);
  });

  it('a learned window counts the completion only if the error that taught it did', () => {
    const counted = learnedTarget(400_000, { limitTokens: 120_000, completionCounted: true }, RATIO, 32_000, 4);
    const notCounted = learnedTarget(400_000, { limitTokens: 120_000, completionCounted: false }, RATIO, 32_000, 4);
    expect(counted!.fitBytes).toBe(Math.floor(88_000 * 4 * 0.9));
    expect(notCounted!.fitBytes).toBe(Math.floor(120_000 * 4 * 0.9));
  });

  it('smallest() only tightens: every limit is the smaller of the two, with the tighter window\u2019s completion flag', () => {
    const bound = fc.option(fc.integer({ min: 1, max: 1e7 }), { nil: undefined });
    const bounds = fc.record({ limitTokens: bound, limitBytes: bound, refusedBytes: bound, completionCounted: fc.option(fc.boolean(), { nil: undefined }) });
    fc.assert(
      fc.property(bounds, bounds, (a, b) => {
        const s = smallest(a, b);
        for (const key of ['limitTokens', 'limitBytes', 'refusedBytes'] as const) {
          const known = [a[key], b[key]].filter((v): v is number => v !== undefined);
          expect(s[key]).toBe(known.length > 0 ? Math.min(...known) : undefined);
        }
        if (a.limitTokens !== undefined && (b.limitTokens === undefined || a.limitTokens < b.limitTokens)) expect(s.completionCounted).toBe(a.completionCounted);
        if (b.limitTokens !== undefined && (a.limitTokens === undefined || b.limitTokens < a.limitTokens)) expect(s.completionCounted).toBe(b.completionCounted);
      }),
      { seed: 13 },
    );
  });
});

describe('clampedCompletion', () => {
  const floor = 1024;

  it('lowers max_tokens to what fits, with a margin, when the prompt fits and the completion counted', () => {
    // 120,000 window, 100,000 prompt, margin max(64, 1%): 18,800 left for the completion.
    expect(clampedCompletion('context_length', withCompletion, 32_000, floor)).toBe(18_800);
  });

  it('gives nothing when the lowered limit would fall below the floor', () => {
    expect(clampedCompletion('context_length', withCompletion, 32_000, 18_801)).toBeNull();
    expect(clampedCompletion('context_length', withCompletion, 32_000, 18_800)).toBe(18_800);
  });

  it('gives nothing when the numbers do not show the prompt fits or the completion counted', () => {
    expect(clampedCompletion('context_length', windowOnly, 32_000, floor)).toBeNull();
    expect(clampedCompletion('context_length', { ...withCompletion, promptTokens: 120_000 }, 32_000, floor)).toBeNull();
    expect(clampedCompletion('context_length', { limitTokens: 120_000, completionTokens: 32_000 }, 32_000, floor)).toBeNull();
    expect(clampedCompletion('body_too_large', withCompletion, 32_000, floor)).toBeNull();
    expect(clampedCompletion('context_length', withCompletion, undefined, floor)).toBeNull();
  });

  it('gives nothing when the requested completion already fits (the prompt is the problem)', () => {
    expect(clampedCompletion('context_length', withCompletion, 18_800, floor)).toBeNull();
    expect(clampedCompletion('context_length', withCompletion, 18_801, floor)).toBe(18_800);
  });
});

describe('sizing another call to the same model (the summarizer\u2019s)', () => {
  const vllm = { limitTokens: 1_500, promptTokens: 4_000, completionTokens: 256 };

  it('a window that counts the completion: what fits shrinks with the completion the call asks for', () => {
    const t = sizeTarget(contextLength(vllm, 16_000, 256), undefined, RATIO);
    expect(t.bounds).toMatchObject({ limitTokens: 1_500, completionCounted: true, bytesPerToken: 4 });
    expect(fitFor(t.bounds!, t.bytesPerToken, 256)).toBe(Math.floor((1_500 - 256) * 4 * 0.9));
    expect(fitFor(t.bounds!, t.bytesPerToken, 1_000)).toBe(Math.floor((1_500 - 1_000) * 4 * 0.9));
  });

  it('a refused size with no numbers bounds every body; nothing known: no bound', () => {
    const t = sizeTarget(tooLarge({}, 100_000), undefined, RATIO);
    expect(fitFor(t.bounds!, t.bytesPerToken, 2_000)).toBe(90_000);
    expect(fitFor({}, 4, 2_000)).toBe(Infinity);
  });
});

describe('whether the limit is known or a guess', () => {
  it('a limit of the kind that refused: a window for a context error, a byte limit for a 413; a refused size alone is a guess', () => {
    expect(sizeTarget(contextLength({ limitTokens: 8_000, promptTokens: 9_000 }, 36_000, 100), undefined, RATIO).exact).toBe(true);
    expect(sizeTarget(tooLarge({}, 100_000), undefined, RATIO).exact).toBe(false);
    // A window learned elsewhere says nothing of the bytes an edge takes.
    expect(sizeTarget(tooLarge({}, 100_000), { limitTokens: 200_000 }, RATIO).exact).toBe(false);
    expect(sizeTarget(tooLarge({}, 100_000), { limitBytes: 50_000 }, RATIO).exact).toBe(true);
  });
});
