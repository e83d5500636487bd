import { describe, expect, it } from 'vitest';
import { clampedCompletion, learnedTarget, sizeTarget, smallest, type Rejection, type SizeTarget } from '../../src/compaction/target.js';
import type { StatedLimits } from '../../src/overlong/types.js';

/** A target as the compaction uses it, without the bounds it carries for sizing other calls (and whether they are exact). */
const plain = (t: SizeTarget | null) => {
  if (!t) return t;
  const { bounds: _bounds, exact: _exact, ...rest } = t;
  return rest;
};

/*
 * The size a compaction fits under and aims at, with literal numbers: these are the `limit=`,
 * `tokens-before=` and the replay's size a user sees, for each kind of rejection and each
 * combination with what was learned before.
 */

const RATIO = 0.5;
const context = (limits: StatedLimits, bodyBytes: number, requested?: number): Rejection => ({ reason: 'context_length', limits, bodyBytes, requested });
const tooLarge = (limits: StatedLimits, bodyBytes: number): Rejection => ({ reason: 'body_too_large', limits, bodyBytes, requested: undefined });

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
    expect(plain(sizeTarget(context({ ...window, promptTokens: 20_000 }, 200_000), undefined, RATIO))).toMatchObject({ bytesPerToken: 8, fitBytes: 72_000, aimBytes: 40_000 });
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
    expect(plain(sizeTarget(context({ limitTokens: 10_000 }, 90_000), { bytesPerToken: 1 }, RATIO))).toMatchObject({ bytesPerToken: 3, tokensBefore: 30_000 });
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
    const t = sizeTarget(context({ limitTokens: 10_000, promptTokens: 12_000, completionCounted: true }, 48_000, 2_000), undefined, RATIO);
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
    expect(plain(sizeTarget(tooLarge({}, 5), undefined, RATIO))).toEqual({ fitBytes: 4, aimBytes: 2, bytesPerToken: 3, tokensBefore: 2, source: 'learned' });
  });

  it('a body of nothing refused and nothing known: the blind guess, 80% fits and half is aimed at', () => {
    expect(plain(sizeTarget(context({}, 0), undefined, RATIO))).toEqual({ fitBytes: 0, aimBytes: 0, bytesPerToken: 3, tokensBefore: 0, source: 'default' });
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
    expect(plain(sizeTarget(tooLarge({}, 100_000), { refusedBytes: 500_000 }, RATIO))).toMatchObject({ fitBytes: 90_000, aimBytes: 50_000, source: 'learned' });
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
    expect(plain(learnedTarget(1_000_000, { limitTokens: 10_000 }, 0.95, undefined, 4))).toMatchObject({ fitBytes: 36_000, aimBytes: 36_000 });
    expect(plain(sizeTarget(tooLarge({}, 100_000), undefined, 0.95))).toMatchObject({ fitBytes: 90_000, aimBytes: 80_000 });
    expect(plain(sizeTarget(tooLarge({}, 1_000_000), { refusedBytes: 100_000 }, 0.95))).toMatchObject({ fitBytes: 90_000, aimBytes: 90_000 });
  });

  it('smallest(): the completion flag goes with the window it came from; an equal window keeps the first', () => {
    expect(smallest({ limitTokens: 100, completionCounted: true }, { limitTokens: 100, completionCounted: false }).completionCounted).toBe(true);
    expect(smallest({ limitTokens: 200, completionCounted: true }, { limitTokens: 100, completionCounted: false }).completionCounted).toBe(false);
    expect(smallest({ completionCounted: true }, { limitTokens: 100, completionCounted: false }).completionCounted).toBe(false);
    expect(smallest({ bytesPerToken: 2 }, { bytesPerToken: 5 }).bytesPerToken).toBe(2);
    expect(smallest({}, { bytesPerToken: 5 }).bytesPerToken).toBe(5);
  });
});

describe('clampedCompletion margins', () => {
  it('a small window keeps a margin of 64 tokens; a large one 1%, rounded up', () => {
    expect(clampedCompletion('context_length', { limitTokens: 4_000, promptTokens: 3_000, completionTokens: 2_000 }, 2_000, 1)).toBe(936);
    expect(clampedCompletion('context_length', { limitTokens: 10_050, promptTokens: 5_000, completionTokens: 8_000 }, 8_000, 1)).toBe(4_949);
  });

  it('a completion counted by the words of the error is enough; a prompt of 0 tokens says nothing', () => {
    expect(clampedCompletion('context_length', { limitTokens: 4_000, promptTokens: 3_000, completionCounted: true }, 2_000, 1)).toBe(936);
    expect(clampedCompletion('context_length', { limitTokens: 4_000, promptTokens: 0, completionCounted: true }, 8_000, 1)).toBeNull();
    expect(clampedCompletion('context_length', { limitTokens: 4_000, promptTokens: 3_000 }, 2_000, 1)).toBeNull();
  });
});
