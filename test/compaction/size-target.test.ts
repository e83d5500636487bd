import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  clampedCompletion,
  fitFor,
  learnedTarget,
  sizeTarget,
  smallest,
  type Bounds,
  type Rejection,
  type SizeTarget,
} from '../../src/compaction/size-target.js';
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
  const body =
    shape === 'openai'
      ? { error: { message, type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } }
      : { type: 'error', error: { type: 'invalid_request_error', message } };
  const verdict = classifyResponse({ status: 400, contentType: 'application/json', body: JSON.stringify(body) });
  if (!verdict.overlong) throw new Error(`not overlong: ${verdict.rule}`);
  return verdict.limits;
}

const contextLength = (limits: StatedLimits, bodyBytes: number, requested?: number): Rejection => ({
  reason: 'context_length',
  limits,
  bodyBytes,
  requested,
});
const tooLarge = (limits: StatedLimits, bodyBytes: number): Rejection => ({
  reason: 'body_too_large',
  limits,
  bodyBytes,
  requested: undefined,
});

// 400 KB rejected at 100,000 tokens: 4 bytes a token; a 64,000-token window; max_tokens 32,000.
const windowOnly = statedBy(
  "This model's maximum context length is 64000 tokens. However, your messages resulted in 100000 tokens. Please reduce the length of the messages.",
  'openai',
);
const withCompletion = statedBy(
  'input length and `max_tokens` exceed context limit: 100000 + 32000 > 120000, decrease input length or `max_tokens` and try again',
  'anthropic',
);

describe('sizeTarget after a context-length 400', () => {
  it('does not subtract max_tokens when the error states the window but not the completion', () => {
    expect(windowOnly).toMatchObject({ limitTokens: 64_000, promptTokens: 100_000 });
    const t = sizeTarget(contextLength(windowOnly, 400_000, 32_000), undefined, RATIO);
    expect(plain(t)).toEqual({
      fitBytes: Math.floor(64_000 * 4 * 0.9),
      aimBytes: Math.floor(64_000 * 4 * RATIO),
      bytesPerToken: 4,
      tokensBefore: 100_000,
      source: 'stated',
    });
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
    expect(plain(sizeTarget(contextLength({}, 1_000_000), undefined, RATIO))).toMatchObject({
      fitBytes: 900_000,
      aimBytes: 600_000,
      source: 'learned',
      bytesPerToken: 3,
    });
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
    expect(plain(sizeTarget(contextLength(windowOnly, 400_000, 32_000), loose, RATIO))).toEqual(
      plain(sizeTarget(contextLength(windowOnly, 400_000, 32_000), undefined, RATIO)),
    );
  });

  it('a window this error states replaces a learned one, looser or tighter: the error is the truth now', () => {
    const stated = plain(sizeTarget(contextLength(windowOnly, 400_000, 32_000), undefined, RATIO));
    for (const limitTokens of [1_000_000, 16_000]) {
      expect(plain(sizeTarget(contextLength(windowOnly, 400_000, 32_000), { limitTokens, completionCounted: true }, RATIO))).toEqual(
        stated,
      );
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
    const bounds = fc.record({
      limitTokens: bound,
      limitBytes: bound,
      refusedBytes: bound,
      completionCounted: fc.option(fc.boolean(), { nil: undefined }),
    });
    fc.assert(
      fc.property(bounds, bounds, (a, b) => {
        const s = smallest(a, b);
        for (const key of ['limitTokens', 'limitBytes', 'refusedBytes'] as const) {
          const known = [a[key], b[key]].filter((v): v is number => v !== undefined);
          expect(s[key]).toBe(known.length > 0 ? Math.min(...known) : undefined);
        }
        if (a.limitTokens !== undefined && (b.limitTokens === undefined || a.limitTokens < b.limitTokens))
          expect(s.completionCounted).toBe(a.completionCounted);
        if (b.limitTokens !== undefined && (a.limitTokens === undefined || b.limitTokens < a.limitTokens))
          expect(s.completionCounted).toBe(b.completionCounted);
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

describe('the numbers a user sees (limit=, tokens-before=, the replay\u2019s size), for each rejection', () => {
  /*
   * The size a compaction fits under and aims at, with literal numbers: these are the `limit=`,
   * `tokens-before=` and the replay's size a user sees, for each kind of rejection and each
   * combination with what was learned before.
   */

  const RATIO = 0.5;
  const context = (limits: StatedLimits, bodyBytes: number, requested?: number): Rejection => ({
    reason: 'context_length',
    limits,
    bodyBytes,
    requested,
  });

  describe('bytes per token', () => {
    it('the rejected body over the stated prompt tokens, within 1 to 8', () => {
      const window = { limitTokens: 10_000 };
      expect(plain(sizeTarget(context({ ...window, promptTokens: 20_000 }, 100_000), undefined, RATIO))).toEqual({
        fitBytes: 45_000,
        aimBytes: 25_000,
        bytesPerToken: 5,
        tokensBefore: 20_000,
        source: 'stated',
      });
      // 200,000 bytes for 20,000 tokens is 10 a token: 8 is believed.
      expect(plain(sizeTarget(context({ ...window, promptTokens: 20_000 }, 200_000), undefined, RATIO))).toMatchObject({
        bytesPerToken: 8,
        fitBytes: 72_000,
        aimBytes: 40_000,
      });
      // 10,000 bytes for 20,000 tokens: 1 a token at least (the fit still below the rejected body).
      expect(plain(sizeTarget(context({ ...window, promptTokens: 20_000 }, 10_000), undefined, RATIO))).toEqual({
        fitBytes: 9_000,
        aimBytes: 5_000,
        bytesPerToken: 1,
        tokensBefore: 20_000,
        source: 'stated',
      });
    });

    it('without a stated prompt size: the conversation\u2019s, else 3 (never one learned from another request); tokens-before estimated from it', () => {
      expect(plain(sizeTarget(context({ limitTokens: 10_000 }, 90_000), { bytesPerToken: 1 }, RATIO))).toMatchObject({
        bytesPerToken: 3,
        tokensBefore: 30_000,
      });
      expect(plain(sizeTarget(context({ limitTokens: 10_000 }, 90_000), undefined, RATIO, 6))).toEqual({
        fitBytes: 54_000,
        aimBytes: 30_000,
        bytesPerToken: 6,
        tokensBefore: 15_000,
        source: 'stated',
      });
      expect(plain(sizeTarget(context({ limitTokens: 10_000 }, 90_001), undefined, RATIO))).toEqual({
        fitBytes: 27_000,
        aimBytes: 15_000,
        bytesPerToken: 3,
        tokensBefore: 30_000,
        source: 'stated',
      });
    });
  });

  describe('what a rejection states', () => {
    it('a 413 stating a token window, or a 400 stating a byte limit, states no bound it applies: the refused size is', () => {
      const expected = { fitBytes: 90_000, aimBytes: 50_000, bytesPerToken: 3, tokensBefore: 33_333, source: 'learned' };
      expect(plain(sizeTarget(tooLarge({ limitTokens: 1_000 }, 100_000), undefined, RATIO))).toEqual(expected);
      expect(plain(sizeTarget(context({ limitBytes: 1_000 }, 100_000), undefined, RATIO))).toEqual(expected);
    });

    it('a completion counted by the words of the error (no number for it) is subtracted too', () => {
      const t = sizeTarget(
        context({ limitTokens: 10_000, promptTokens: 12_000, completionCounted: true }, 48_000, 2_000),
        undefined,
        RATIO,
      );
      expect(plain(t)).toEqual({ fitBytes: 28_800, aimBytes: 16_000, bytesPerToken: 4, tokensBefore: 12_000, source: 'stated' });
    });

    it('a requested completion larger than the window leaves no room at all', () => {
      const t = sizeTarget(context({ limitTokens: 1_000, promptTokens: 1_000, completionTokens: 2_000 }, 4_000, 2_000), undefined, RATIO);
      expect(t).toMatchObject({ fitBytes: 0, aimBytes: 0 });
    });

    it('a completion counted but not requested: nothing subtracted', () => {
      const t = sizeTarget(context({ limitTokens: 10_000, promptTokens: 12_000, completionCounted: true }, 48_000), undefined, RATIO);
      expect(t).toMatchObject({ fitBytes: 36_000, aimBytes: 20_000 });
    });

    it('a small refused body: the fit is at least one byte below it', () => {
      expect(plain(sizeTarget(tooLarge({}, 5), undefined, RATIO))).toEqual({
        fitBytes: 4,
        aimBytes: 2,
        bytesPerToken: 3,
        tokensBefore: 2,
        source: 'learned',
      });
    });

    it('a body of nothing refused and nothing known: the blind guess, 80% fits and half is aimed at', () => {
      expect(plain(sizeTarget(context({}, 0), undefined, RATIO))).toEqual({
        fitBytes: 0,
        aimBytes: 0,
        bytesPerToken: 3,
        tokensBefore: 0,
        source: 'default',
      });
    });
  });

  describe('with what was learned', () => {
    it('a learned window and a learned refused size: the smaller bound wins, in the conversation\u2019s bytes per token', () => {
      // Window: 10,000 tokens at 4 bytes = 40,000: fit 36,000, aim 20,000. Refused 30,000: fit 27,000, aim 15,000.
      const t = sizeTarget(tooLarge({}, 1_000_000), { limitTokens: 10_000, refusedBytes: 30_000 }, RATIO, 4);
      expect(plain(t)).toEqual({ fitBytes: 27_000, aimBytes: 15_000, bytesPerToken: 4, tokensBefore: 250_000, source: 'learned' });
      const looser = sizeTarget(tooLarge({}, 1_000_000), { limitTokens: 10_000, refusedBytes: 900_000 }, RATIO, 4);
      expect(plain(looser)).toEqual({ fitBytes: 36_000, aimBytes: 20_000, bytesPerToken: 4, tokensBefore: 250_000, source: 'learned' });
    });

    it('a refused size this error teaches, smaller than the one learned, is the bound', () => {
      expect(plain(sizeTarget(tooLarge({}, 100_000), { refusedBytes: 500_000 }, RATIO))).toMatchObject({
        fitBytes: 90_000,
        aimBytes: 50_000,
        source: 'learned',
      });
    });

    it('a stated byte limit keeps the learned window (which it does not state) when that is tighter', () => {
      const t = sizeTarget(tooLarge({ limitBytes: 1_000_000 }, 2_000_000), { limitTokens: 10_000 }, RATIO, 4);
      expect(plain(t)).toEqual({ fitBytes: 36_000, aimBytes: 20_000, bytesPerToken: 4, tokensBefore: 500_000, source: 'stated' });
    });

    it('learnedTarget: a compaction ahead, from learned bounds alone', () => {
      expect(plain(learnedTarget(100_000, { limitTokens: 10_000 }, RATIO, 1_000, 2))).toEqual({
        fitBytes: 18_000,
        aimBytes: 10_000,
        bytesPerToken: 2,
        tokensBefore: 50_000,
        source: 'learned',
      });
      expect(plain(learnedTarget(100_000, { limitTokens: 10_000, completionCounted: true }, RATIO, 1_000))).toEqual({
        fitBytes: 24_300,
        aimBytes: 13_500,
        bytesPerToken: 3,
        tokensBefore: 33_333,
        source: 'learned',
      });
      // No rejected body to stay under: a learned byte limit larger than the request still counts.
      expect(plain(learnedTarget(1_000, { limitBytes: 100_000 }, RATIO, undefined))).toMatchObject({ fitBytes: 98_000, aimBytes: 50_000 });
      expect(plain(learnedTarget(1_000, { completionCounted: true }, RATIO, 10, 4))).toBeNull();
    });

    it('the aim is never above what fits, even with a share above the headroom', () => {
      // 10,000 tokens at 4 bytes: 90% fits (36,000 bytes); a 0.95 share would aim at 38,000.
      expect(plain(learnedTarget(1_000_000, { limitTokens: 10_000 }, 0.95, undefined, 4))).toMatchObject({
        fitBytes: 36_000,
        aimBytes: 36_000,
      });
      expect(plain(sizeTarget(tooLarge({}, 100_000), undefined, 0.95))).toMatchObject({ fitBytes: 90_000, aimBytes: 80_000 });
      expect(plain(sizeTarget(tooLarge({}, 1_000_000), { refusedBytes: 100_000 }, 0.95))).toMatchObject({
        fitBytes: 90_000,
        aimBytes: 90_000,
      });
    });

    it('smallest(): the completion flag goes with the window it came from; an equal window keeps the first', () => {
      expect(
        smallest({ limitTokens: 100, completionCounted: true }, { limitTokens: 100, completionCounted: false }).completionCounted,
      ).toBe(true);
      expect(
        smallest({ limitTokens: 200, completionCounted: true }, { limitTokens: 100, completionCounted: false }).completionCounted,
      ).toBe(false);
      expect(smallest({ completionCounted: true }, { limitTokens: 100, completionCounted: false }).completionCounted).toBe(false);
      expect(smallest({ bytesPerToken: 2 }, { bytesPerToken: 5 }).bytesPerToken).toBe(2);
      expect(smallest({}, { bytesPerToken: 5 }).bytesPerToken).toBe(5);
    });
  });

  describe('clampedCompletion margins', () => {
    it('a small window keeps a margin of 64 tokens; a large one 1%, rounded up', () => {
      expect(clampedCompletion('context_length', { limitTokens: 4_000, promptTokens: 3_000, completionTokens: 2_000 }, 2_000, 1)).toBe(936);
      expect(clampedCompletion('context_length', { limitTokens: 10_050, promptTokens: 5_000, completionTokens: 8_000 }, 8_000, 1)).toBe(
        4_949,
      );
    });

    it('a completion counted by the words of the error is enough; a prompt of 0 tokens says nothing', () => {
      expect(clampedCompletion('context_length', { limitTokens: 4_000, promptTokens: 3_000, completionCounted: true }, 2_000, 1)).toBe(936);
      expect(clampedCompletion('context_length', { limitTokens: 4_000, promptTokens: 0, completionCounted: true }, 8_000, 1)).toBeNull();
      expect(clampedCompletion('context_length', { limitTokens: 4_000, promptTokens: 3_000 }, 2_000, 1)).toBeNull();
    });
  });
});
