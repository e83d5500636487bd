import { describe, expect, it } from 'vitest';
import { clampSummaryText, fallbackSummaryText } from '../../src/compaction/fallback.js';
import { jsonBytes } from '../../src/compaction/size.js';
import type { Rendered } from '../../src/dialects/types.js';

/*
 * The fallback summary, read as the model after the compaction reads it: its exact lines for the
 * cases the mechanical digest has rules for (what counts as a user request, which arguments are
 * paths, how the tool line is ordered and capped, what is left out for room).
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

describe('requests from the user', () => {
  it('the first non-blank line of each user message, named or not; never an assistant or tool text', () => {
    const text = fallbackSummaryText(
      [
        who('user', '\n   \n  first line  \nsecond'),
        who('assistant', 'I will'),
        who('user (alice)', 'from alice'),
        who('tool result c1', 'output'),
        who('username', 'not a user'),
        who('user', ''),
        who('user', `${' '.repeat(10_000)}after ten thousand blanks`),
        who('user', 'x'.repeat(200)),
        who('user', 'y'.repeat(201)),
      ],
      0,
      10_000,
    );
    expect(text).toBe(
      [
        HEAD(9, 0),
        'No tool calls.',
        '',
        'Requests from the user, in order:',
        '- first line',
        '- from alice',
        '- (no text)',
        '- (no text)',
        `- ${'x'.repeat(200)}`,
        `- ${'y'.repeat(200)}…`,
      ].join('\n'),
    );
  });
});

describe('files and paths named in tool calls', () => {
  it('string values under path-, file- or dir-like keys of the arguments object, trimmed, each once, in order', () => {
    const calls = [
      call('read', { path: ' src/a.ts ', limit: 10 }),
      call('edit', { File: 'src/b.ts', content: 'not/a/path' }),
      call('list', { directory: 'src', dirs: ['lib', 'src/a.ts', 3, '', '  '] }),
      call('grep', { pattern: 'x', filePath: 'multi\nline' }),
      call('bash', { command: 'cat src/c.ts' }),
      call('read', { path: 'p'.repeat(300) }),
      call('read', { path: 'q'.repeat(301) }),
      call('read', '["src/array.ts"]'),
      call('read', '"src/string.ts"'),
      call('read', 'null'),
      call('read', '{"path": "src/broken.ts"'),
      call('read', `{"path":"src/huge.ts","pad":"${'z'.repeat(100_000)}"}`),
      call('read', `{"path":"src/big.ts","pad":"${'z'.repeat(99_970)}"}`),
    ];
    const text = fallbackSummaryText([who('assistant', '', calls)], 0, 1_000_000);
    expect(text.split('\n\n')[1]).toBe(
      ['Files and paths named in tool calls:', '- src/a.ts', '- src/b.ts', '- src', '- lib', `- ${'p'.repeat(300)}`, '- src/big.ts'].join('\n'),
    );
  });

  it('arguments that are not a string are not read', () => {
    const text = fallbackSummaryText([who('assistant', '', [{ id: 'c', name: 'read', args: { path: 'src/a.ts' } as never }])], 0, 10_000);
    expect(text).toBe(`${HEAD(1, 0)}\nTool calls: 1 (read 1).`);
  });
});

describe('within the budget', () => {
  const users = (n: number) => Array.from({ length: n }, (_, i) => who('user', `request ${i}`));

  it('lists the lines that fit, keeping room before each but the last for the line that says how many more', () => {
    const header = `${HEAD(5, 0)}\nNo tool calls.\n\nRequests from the user, in order:`;
    const all = fallbackSummaryText(users(5), 0, 10_000);
    expect(all).toBe(`${header}\n- request 0\n- request 1\n- request 2\n- request 3\n- request 4`);
    // Each line is 12 bytes, "\n... and 5 more" 15: the fourth line needs room for itself and
    // that line (63 bytes), the fifth only for itself.
    expect(fallbackSummaryText(users(5), 0, escaped(all) + 3)).toBe(all);
    const cut = fallbackSummaryText(users(5), 0, escaped(all) + 2);
    expect(cut).toBe(`${header}\n- request 0\n- request 1\n- request 2\n... and 2 more`);
    expect(escaped(cut)).toBeLessThanOrEqual(escaped(all) + 2);
  });

  it('a section whose title does not fit is left out', () => {
    const items = [who('user', 'do it', [call('read', { path: 'src/a.ts' })])];
    const header = `${HEAD(1, 0)}\nTool calls: 1 (read 1).`;
    const requests = `${header}\n\nRequests from the user, in order:`;
    expect(fallbackSummaryText(items, 0, 10_000)).toBe(`${requests}\n- do it\n\nFiles and paths named in tool calls:\n- src/a.ts`);
    // Room after the title for its one line exactly (the last line needs no room for a more-line).
    expect(fallbackSummaryText(items, 0, escaped(`${requests}\n- do it`))).toBe(`${requests}\n- do it`);
    // No room after the title: neither section.
    expect(fallbackSummaryText(items, 0, escaped(requests))).toBe(header);
    // The requests listed, no room for the next title.
    const listed = `${requests}\n- do it`;
    expect(fallbackSummaryText(items, 0, escaped(`${listed}\n\nFiles and paths named in tool calls:`))).toBe(listed);
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
