import { describe, expect, it } from 'vitest';
import { clampSummaryText, fallbackSummaryText } from '../../src/compaction/fallback.js';
import { jsonBytes } from '../../src/compaction/size.js';
import type { Rendered } from '../../src/dialects/types.js';

/*
 * The fallback summary, read as the model after the compaction reads it: its exact lines for the
 * cases the mechanical digest has rules for (how the tool line is ordered and capped). What the
 * person asked and which paths the calls named are in the trail (trail.test.ts).
 */

const escaped = (text: string): number => jsonBytes(text) - 2;
const who = (w: string, text: string, calls: Rendered['calls'] = []): Rendered => ({ who: w, text, calls });
const call = (name: string, args: unknown, id = 'c'): Rendered['calls'][number] => ({ id, name, args: typeof args === 'string' ? args : JSON.stringify(args) });
const HEAD = (messages: number, tokens: number | string) => `${messages} message${messages === 1 ? '' : 's'} (about ${tokens} tokens) were condensed without a model summary; what follows is a mechanical digest.`;

describe('the header lines', () => {
  it('one message, no tool calls; tokens are a quarter of the bytes, rounded', () => {
    expect(fallbackSummaryText([who('assistant', 'ok')], 10, 10_000)).toBe(`${HEAD(1, 3)}\nNo tool calls.`);
    expect(fallbackSummaryText([who('assistant', 'ok'), who('assistant', 'ok')], 4_002, 10_000)).toBe(`${HEAD(2, '1,001')}\nNo tool calls.`);
    expect(fallbackSummaryText([who('assistant', 'ok')], 4_000_000, 10_000)).toBe(`${HEAD(1, '1,000,000')}\nNo tool calls.`);
  });

  it('tools by use, most used first, ties by name; a call without a name is "unnamed"; twelve shown, then how many more', () => {
    const calls = [
      ...['zeta', 'alpha', 'mid', 'alpha', '', 'zeta', 'zeta'].map((n) => call(n, '{}')),
      ...Array.from({ length: 12 }, (_, i) => call(`t${String(i).padStart(2, '0')}`, '{}')),
    ];
    const text = fallbackSummaryText([who('assistant', '', calls)], 0, 10_000);
    expect(text.split('\n')[1]).toBe(
      'Tool calls: 19 (zeta 3, alpha 2, mid 1, t00 1, t01 1, t02 1, t03 1, t04 1, t05 1, t06 1, t07 1, t08 1, and 4 more tools).',
    );
    const twelve = Array.from({ length: 12 }, (_, i) => call(`t${String(i).padStart(2, '0')}`, '{}'));
    expect(fallbackSummaryText([who('assistant', '', twelve)], 0, 10_000).split('\n')[1]).toBe(
      'Tool calls: 12 (t00 1, t01 1, t02 1, t03 1, t04 1, t05 1, t06 1, t07 1, t08 1, t09 1, t10 1, t11 1).',
    );
    expect(fallbackSummaryText([who('assistant', '', [call('', '{}')])], 0, 10_000).split('\n')[1]).toBe('Tool calls: 1 (unnamed 1).');
  });

  it('a tool used 1,234 times is counted with a thousands separator', () => {
    const calls = Array.from({ length: 1234 }, () => call('bash', '{}'));
    expect(fallbackSummaryText([who('assistant', '', calls)], 0, 10_000).split('\n')[1]).toBe('Tool calls: 1,234 (bash 1,234).');
  });
});

describe('clampSummaryText', () => {
  const MARKER = '\n[... summary truncated by compaction-gateway ...]';

  it('keeps a text that escapes to exactly the budget; one byte over is cut to the budget with the marker', () => {
    expect(clampSummaryText('abc"', 5)).toBe('abc"');
    const cut = clampSummaryText(`${'a'.repeat(100)}"`, 100);
    expect(cut).toBe(`${'a'.repeat(100 - escaped(MARKER))}${MARKER}`);
    expect(escaped(cut)).toBe(100);
  });

  it('with less room than the marker itself: the text cut to the budget, no marker', () => {
    const room = escaped(MARKER) - 1;
    expect(clampSummaryText('b'.repeat(500), room)).toBe('b'.repeat(room));
    expect(clampSummaryText('b'.repeat(500), escaped(MARKER))).toBe(MARKER);
  });
});
