import { describe, expect, it } from 'vitest';
import { sizeTarget } from '../../src/compaction/target.js';

describe('sizeTarget', () => {
  it('aims under the stated window minus the requested completion, in this request\u2019s bytes per token', () => {
    // 400 KB rejected at 100,000 tokens: 4 bytes a token; window 64,000, completion 4,000.
    const t = sizeTarget('context_length', { limitTokens: 64_000, promptTokens: 100_000 }, 400_000, 4_000);
    expect(t.bytesPerToken).toBe(4);
    expect(t.tokensBefore).toBe(100_000);
    expect(t.bodyBytes).toBe(Math.floor((64_000 - 4_000) * 0.85 * 4));
  });

  it('prefers the completion the error states over the request\u2019s', () => {
    const t = sizeTarget('context_length', { limitTokens: 8_000, promptTokens: 10_000, completionTokens: 2_000 }, 40_000, 500);
    expect(t.bodyBytes).toBe(Math.floor(6_000 * 0.85 * 4));
  });

  it('never aims above 80% of the rejected body, whatever the numbers', () => {
    const t = sizeTarget('context_length', { limitTokens: 1_000_000, promptTokens: 1_000_001 }, 4_000_000, undefined);
    expect(t.bodyBytes).toBe(3_200_000);
  });

  it('halves a context-length rejection that states no numbers', () => {
    expect(sizeTarget('context_length', {}, 1_000_000, undefined).bodyBytes).toBe(500_000);
  });

  it('aims under a 413\u2019s stated body limit', () => {
    expect(sizeTarget('body_too_large', { limitBytes: 1_048_576 }, 3_000_000, undefined).bodyBytes).toBe(Math.floor(1_048_576 * 0.85));
    // just over the limit: still at most 80% of what was rejected
    expect(sizeTarget('body_too_large', { limitBytes: 1_048_576 }, 1_056_562, undefined).bodyBytes).toBe(Math.floor(1_056_562 * 0.8));
  });

  it('without a stated limit, aims under 1 MiB (or a tenth of a huge request)', () => {
    expect(sizeTarget('body_too_large', {}, 7_000_000, undefined).bodyBytes).toBe(Math.floor(0.9 * 1024 * 1024));
    expect(sizeTarget('body_too_large', {}, 100_000_000, undefined).bodyBytes).toBe(10_000_000);
    expect(sizeTarget('body_too_large', {}, 1_500_000, undefined).bodyBytes).toBe(750_000);
  });
});
