import { describe, expect, it } from 'vitest';
import { believed, lessonOf, loosened, mergedLimit, type LearnedLimit } from '../../src/memory/limits.js';

/*
 * What one refusal teaches, and when that is believed (src/memory/limits.ts): a stated limit only
 * when it fits the refused request, only for requests at least half that size, and only until an
 * accepted request disproves it.
 */

describe('what a refusal teaches', () => {
  it('a stated window the refused request could have overflowed, with the size it came from', () => {
    // 200 KB is some 67,000 tokens at 3 bytes a token: a 40-token window is consistent with "too long".
    expect(lessonOf('context_length', { limitTokens: 40 }, 200_000)).toEqual({
      limitTokens: 40,
      completionCounted: false,
      windowFrom: 200_000,
    });
    expect(lessonOf('context_length', { limitTokens: 8_000, promptTokens: 9_000, completionTokens: 500 }, 36_000)).toEqual({
      limitTokens: 8_000,
      completionCounted: true,
      windowFrom: 36_000,
    });
  });

  it('a window more than twice the refused request is not believed: the refused size is what is learned', () => {
    // 3 KB is some 1,000 tokens: it cannot have overflowed a 128,000-token window.
    expect(lessonOf('context_length', { limitTokens: 128_000 }, 3_000)).toEqual({ refusedBytes: 3_000 });
    // The error's own count wins over the estimate (images count many tokens in few bytes).
    expect(lessonOf('context_length', { limitTokens: 200_000, promptTokens: 227_255 }, 31_500)).toMatchObject({ limitTokens: 200_000 });
  });

  it('a body limit the refused body could have passed is not believed either', () => {
    expect(lessonOf('body_too_large', { limitBytes: 1_048_576 }, 2_000_000)).toEqual({ limitBytes: 1_048_576, bodyLimitFrom: 2_000_000 });
    expect(lessonOf('body_too_large', { limitBytes: 10_485_760 }, 2_000_000)).toEqual({ refusedBytes: 2_000_000 });
  });

  it('nothing from an empty refusal', () => {
    expect(lessonOf('body_too_large', {}, 0)).toEqual({});
  });
});

describe('what is believed for a request', () => {
  const limit: LearnedLimit = {
    limitTokens: 40,
    completionCounted: false,
    windowFrom: 200_000,
    limitBytes: 50_000,
    bodyLimitFrom: 60_000,
    refusedBytes: 70_000,
  };

  it('a stated limit for requests at least half the size of the one that stated it; a refused size always', () => {
    expect(believed(limit, 100_000)).toEqual({ limitTokens: 40, completionCounted: false, limitBytes: 50_000, refusedBytes: 70_000 });
    expect(believed(limit, 40_000)).toEqual({ limitBytes: 50_000, refusedBytes: 70_000 });
    expect(believed(limit, 5_000)).toEqual({ refusedBytes: 70_000 });
    expect(believed({ limitTokens: 40, windowFrom: 200_000 }, 5_000)).toBeUndefined();
    expect(believed(undefined, 5_000)).toBeUndefined();
  });
});

describe('what an accepted request disproves', () => {
  it('a window it had more than 8 bytes a token for, a body limit it passed, a refused size it reached', () => {
    const limit: LearnedLimit = {
      limitTokens: 2_000,
      completionCounted: true,
      windowFrom: 12_000,
      limitBytes: 30_000,
      bodyLimitFrom: 31_000,
      refusedBytes: 48_000,
    };
    expect(loosened(limit, 16_000)).toBeNull();
    expect(loosened(limit, 16_001)).toEqual({ limitBytes: 30_000, bodyLimitFrom: 31_000, refusedBytes: 48_000 });
    expect(loosened(limit, 30_001)).toEqual({ refusedBytes: 48_000 });
    expect(loosened(limit, 48_000)).toEqual({});
  });

  it('a forged 40-token window falls to the first ordinary request', () => {
    expect(loosened({ limitTokens: 40, windowFrom: 200_000 }, 400)).toEqual({});
  });
});

describe('lessons added together', () => {
  it('the smaller stated limit, with where it came from; the smaller refused size', () => {
    let limit = mergedLimit(undefined, { limitTokens: 8_000, completionCounted: true, windowFrom: 40_000 });
    limit = mergedLimit(limit, { limitTokens: 9_000, completionCounted: false, windowFrom: 30_000 });
    expect(limit).toEqual({ limitTokens: 8_000, completionCounted: true, windowFrom: 40_000 });
    limit = mergedLimit(limit, { limitTokens: 8_000, completionCounted: true, windowFrom: 20_000 });
    expect(limit).toEqual({ limitTokens: 8_000, completionCounted: true, windowFrom: 20_000 });
    limit = mergedLimit(limit, { refusedBytes: 50_000 });
    limit = mergedLimit(limit, { refusedBytes: 45_000 });
    limit = mergedLimit(limit, { limitBytes: 1_000_000, bodyLimitFrom: 1_200_000 });
    expect(limit).toEqual({
      limitTokens: 8_000,
      completionCounted: true,
      windowFrom: 20_000,
      refusedBytes: 45_000,
      limitBytes: 1_000_000,
      bodyLimitFrom: 1_200_000,
    });
  });
});
