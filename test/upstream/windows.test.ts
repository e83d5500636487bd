import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import type { Discovered, ServerKind } from '../../src/upstream/discover.js';
import { resolveUpstreams } from '../../src/upstream/upstreams.js';
import { WINDOW_TTL_MS, Windows } from '../../src/upstream/windows.js';

/*
 * What the gateway knows of a model's window before sending (src/upstream/windows.ts): declared,
 * discovered in the background, observed from a cut; and each model's bytes per token.
 */

function setup(
  o: { windows?: Array<{ model: string; tokens: number; completionCounted?: boolean }>; discover?: boolean; answers?: Discovered[] } = {},
) {
  const config = validateConfig({ upstream: { url: 'http://127.0.0.1:9/v1', windows: o.windows, discoverWindows: o.discover ?? true } });
  const upstream = resolveUpstreams(config).all[0];
  let now = 1_000_000;
  const asked: Array<{ kind: ServerKind; model: string; credentials: Record<string, unknown> }> = [];
  const answers = [...(o.answers ?? [])];
  let kinds = 0;
  const discoverer = {
    kindOf: async () => (kinds++, 'ollama' as const),
    window: async (kind: ServerKind, _u: unknown, _api: unknown, model: string, credentials: Record<string, string | string[]>) => {
      asked.push({ kind, model, credentials });
      return answers.shift() ?? { found: null, soon: false };
    },
  };
  const windows = new Windows(discoverer, undefined, () => now);
  return { windows, upstream, asked, kinds: () => kinds, advance: (ms: number) => (now += ms) };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('Windows', () => {
  it('a declared window: the first glob that matches, asked of no one', async () => {
    const { windows, upstream, asked } = setup({
      windows: [
        { model: 'qwen3*', tokens: 32_768 },
        { model: '*', tokens: 8_192, completionCounted: false },
      ],
    });
    expect(windows.windowOf(upstream, 'chat', 'qwen3:8b', {})).toEqual({ tokens: 32_768, completionCounted: true, source: 'declared' });
    expect(windows.windowOf(upstream, 'chat', 'llama3', {})).toEqual({ tokens: 8_192, completionCounted: false, source: 'declared' });
    await settle();
    expect(asked).toEqual([]);
    expect(windows.knowsAny(upstream)).toBe(true);
  });

  it('discovered in the background: not known for the request that asked, known for the next, once', async () => {
    const { windows, upstream, asked, kinds } = setup({
      answers: [{ found: { tokens: 16_384, completionCounted: false, from: 'ollama /api/ps' }, soon: false }],
    });
    expect(windows.windowOf(upstream, 'chat', 'qwen3', { authorization: 'Bearer k' })).toBeUndefined();
    // A second request while the first discovery is on its way asks nothing more.
    expect(windows.windowOf(upstream, 'chat', 'qwen3', {})).toBeUndefined();
    await settle();
    expect(windows.windowOf(upstream, 'chat', 'qwen3', {})).toEqual({ tokens: 16_384, completionCounted: false, source: 'discovered' });
    expect(asked).toEqual([{ kind: 'ollama', model: 'qwen3', credentials: { authorization: 'Bearer k' } }]);
    expect(kinds()).toBe(1);
    expect(windows.knowsAny(upstream)).toBe(true);
  });

  it('a discovery that found nothing is asked again later; sooner for a model not loaded yet', async () => {
    const { windows, upstream, asked, advance } = setup({
      answers: [
        { found: null, soon: true },
        { found: null, soon: false },
      ],
    });
    windows.windowOf(upstream, 'chat', 'm', {});
    await settle();
    windows.windowOf(upstream, 'chat', 'm', {});
    expect(asked).toHaveLength(1);
    advance(1_000);
    windows.windowOf(upstream, 'chat', 'm', {});
    await settle();
    expect(asked).toHaveLength(2);
    advance(30_000);
    windows.windowOf(upstream, 'chat', 'm', {});
    expect(asked).toHaveLength(2);
    advance(30_000);
    windows.windowOf(upstream, 'chat', 'm', {});
    await settle();
    expect(asked).toHaveLength(3);
  });

  it('discovery off: never asked', async () => {
    const { windows, upstream, asked } = setup({ discover: false });
    expect(windows.windowOf(upstream, 'chat', 'm', {})).toBeUndefined();
    await settle();
    expect(asked).toEqual([]);
  });

  it('a discovered window expires, and one an answer passes is asked again', async () => {
    const found = { found: { tokens: 4_096, completionCounted: true, from: 'max_model_len' }, soon: false };
    const { windows, upstream, asked, advance } = setup({ answers: [found, found, found] });
    windows.windowOf(upstream, 'chat', 'm', {});
    await settle();
    expect(windows.windowOf(upstream, 'chat', 'm', {})?.tokens).toBe(4_096);
    advance(WINDOW_TTL_MS);
    expect(windows.windowOf(upstream, 'chat', 'm', {})).toBeUndefined();
    await settle();
    expect(asked).toHaveLength(2);
    // The server took a prompt of 5,000 tokens: the window it said is not the one it runs.
    windows.calibrate(upstream, 'm', 20_000, 5_000);
    expect(windows.windowOf(upstream, 'chat', 'm', {})).toBeUndefined();
    await settle();
    expect(asked).toHaveLength(3);
  });

  it('a refusal that states another window drops the discovered one', async () => {
    const found = { found: { tokens: 4_096, completionCounted: true, from: 'max_model_len' }, soon: false };
    const { windows, upstream, asked } = setup({ answers: [found] });
    windows.windowOf(upstream, 'chat', 'm', {});
    await settle();
    windows.contradicted(upstream, 'm', 4_096);
    expect(windows.windowOf(upstream, 'chat', 'm', {})?.tokens).toBe(4_096);
    windows.contradicted(upstream, 'm', 2_048);
    expect(windows.windowOf(upstream, 'chat', 'm', {})).toBeUndefined();
    await settle();
    expect(asked).toHaveLength(2);
  });

  it('an observed cut bounds a declared window, until an answer takes more', () => {
    const { windows, upstream } = setup({ windows: [{ model: '*', tokens: 32_768 }], discover: false });
    windows.observe(upstream, 'm', 8_000);
    expect(windows.windowOf(upstream, 'chat', 'm', {})).toEqual({ tokens: 8_000, completionCounted: false, source: 'observed' });
    windows.calibrate(upstream, 'm', 40_000, 9_000);
    expect(windows.windowOf(upstream, 'chat', 'm', {})).toEqual({ tokens: 32_768, completionCounted: true, source: 'declared' });
  });

  it('an observed window larger than the declared one changes nothing; it expires', () => {
    const { windows, upstream, advance } = setup({ windows: [{ model: 'a', tokens: 4_096 }], discover: false });
    windows.observe(upstream, 'a', 8_000);
    expect(windows.windowOf(upstream, 'chat', 'a', {})?.source).toBe('declared');
    windows.observe(upstream, 'b', 8_000);
    expect(windows.windowOf(upstream, 'chat', 'b', {})?.source).toBe('observed');
    advance(WINDOW_TTL_MS);
    expect(windows.windowOf(upstream, 'chat', 'b', {})).toBeUndefined();
  });

  it('calibration: bytes per token from the answers, moved half way by each', () => {
    const { windows, upstream } = setup({ discover: false });
    expect(windows.bytesPerToken(upstream, 'm')).toBeUndefined();
    windows.calibrate(upstream, 'm', 40_000, 10_000);
    expect(windows.bytesPerToken(upstream, 'm')).toBe(4);
    windows.calibrate(upstream, 'm', 60_000, 10_000);
    expect(windows.bytesPerToken(upstream, 'm')).toBe(5);
    windows.calibrate(upstream, 'm', 60_000, 0);
    expect(windows.bytesPerToken(upstream, 'm')).toBe(5);
    expect(windows.bytesPerToken(upstream, 'other')).toBeUndefined();
  });
});
