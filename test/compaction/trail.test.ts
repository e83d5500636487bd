import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonBytes } from '../../src/compaction/size.js';
import { emptyTrail, resultLine, trailOf, trailText, type Trail, type TrailItem } from '../../src/compaction/trail.js';
import type { Rendered } from '../../src/dialects/types.js';

/*
 * The trail every summary ends with: what it reads off the condensed items, exactly, and how it
 * is written within its bytes.
 */

const escaped = (text: string): number => jsonBytes(text) - 2;
const item = (who: string, text: string, calls: Rendered['calls'] = [], answers: string[] = []): TrailItem => ({
  rendered: { who, text, calls },
  answers,
});
const call = (id: string, name: string, args: unknown): Rendered['calls'][number] => ({
  id,
  name,
  args: typeof args === 'string' ? args : JSON.stringify(args),
});
const asks = (id: string, name: string, args: unknown) => item('assistant', '', [call(id, name, args)]);
const answer = (id: string, text: string) => item(`tool result ${id}`, text, [], [id]);

describe('what the trail reads off the items', () => {
  it('paths read and paths changed, each once, in order; a path read and then edited is listed as changed', () => {
    const trail = trailOf([
      asks('1', 'read_file', { path: ' src/a.ts ' }),
      answer('1', 'export const a = 1;'),
      asks('2', 'Read', { file_path: '/home/dev/src/b.ts' }),
      asks('3', 'read', { filePath: 'src/a.ts' }),
      asks('4', 'Edit', { file_path: '/home/dev/src/b.ts', old_string: 'x', new_string: 'y' }),
      asks('5', 'write_file', { path: 'docs/new.md', content: 'not/a/path' }),
      asks('6', 'list', { directory: 'src', paths: ['lib', 3, '', 'multi\nline'] }),
      asks('7', 'read', { path: 'p'.repeat(301) }),
    ]);
    expect(trail.read).toEqual(['src/a.ts', 'src', 'lib']);
    expect(trail.changed).toEqual(['/home/dev/src/b.ts', 'docs/new.md']);
  });

  it('commands, with the exit status their results show, in the agents\u2019 wordings', () => {
    const trail = trailOf([
      asks('1', 'bash', { command: 'npm test' }),
      answer('1', 'FAIL test/a.test.ts\nExit code: 1'),
      asks('2', 'exec_command', { cmd: 'cat src/x.ts' }),
      answer('2', 'Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n...'),
      asks('3', 'shell', { command: ['bash', '-lc', 'git status'] }),
      answer('3', '{"output":"clean","metadata":{"exit_code":0,"duration_seconds":0.1}}'),
      asks('4', 'run_shell_command', { command: 'ls\n-la' }),
      answer('4', 'a b c'),
      asks('5', 'Bash', { command: 'npm test' }),
      answer('5', 'ok\nexit code 0'),
    ]);
    expect(trail.commands).toEqual(['npm test → exit 1', 'cat src/x.ts → exit 0', 'git status → exit 0', 'ls ⏎ -la', 'npm test → exit 0']);
  });

  it('the first error line of what a tool other than a reader answered; a file that mentions errors is not one', () => {
    const trail = trailOf([
      asks('1', 'read_file', { path: 'src/errors.ts' }),
      answer('1', 'Error: this is code that throws\nTypeError: also code'),
      asks('2', 'bash', { command: 'npx tsc' }),
      answer('2', "src/a.ts(3,1): error TS2304: Cannot find name 'foo'.\nsrc/b.ts(1,1): error TS1005: ';' expected."),
      asks('3', 'bash', { command: 'node x.js' }),
      answer('3', `prelude\nTypeError: x is not a function\n    at y (x.js:1:1)\n${'z'.repeat(300)}`),
      asks('4', 'bash', { command: 'echo fine' }),
      answer('4', 'all good, no errors here'),
    ]);
    expect(trail.errors).toEqual(["src/a.ts(3,1): error TS2304: Cannot find name 'foo'.", 'TypeError: x is not a function']);
  });

  it('the person\u2019s inputs: verbatim when short, else the first line; never a reminder or the gateway\u2019s own summary', () => {
    const long = `Refactor the parser\n${'and more detail '.repeat(30)}`;
    const trail = trailOf([
      item('user', "  don't touch package.json  "),
      item('user (alice)', 'use pnpm, not npm'),
      item('user', `<system-reminder>be nice</system-reminder>keep it under 100 lines`),
      item('user', long),
      item('user', '[compaction-gateway] The 12 earlier messages ... Summary:'),
      item('assistant', 'I will not be listed'),
      item('user', "don't touch package.json"),
    ]);
    expect(trail.said).toEqual(["don't touch package.json", 'use pnpm, not npm', 'keep it under 100 lines', 'Refactor the parser']);
  });

  it('an item answering several calls has one text for all: no status or error is read off it', () => {
    const both = item('tool result a, b', 'FAIL x\nExit code: 1\nOn branch main', [], ['a', 'b']);
    const trail = trailOf([
      item('assistant', '', [call('a', 'bash', { command: 'npm test' }), call('b', 'bash', { command: 'git status' })]),
      both,
    ]);
    expect(trail.commands).toEqual(['npm test', 'git status']);
    expect(trail.errors).toEqual([]);
  });

  it('an unclosed reminder runs to the end of the input', () => {
    const text = `keep it short<system-reminder>${'<system-reminder>'.repeat(20_000)}`;
    expect(trailOf([item('user', text)]).said).toEqual(['keep it short']);
  });

  it('the files a patch names (Codex\u2019s apply_patch), moved ones included', () => {
    const patch =
      '*** Begin Patch\n*** Update File: src/a.ts\n@@\n-x\n+y\n*** Add File: src/new.ts\n+z\n*** Update File: src/old.ts\n*** Move to: src/moved.ts\n*** End Patch';
    expect(trailOf([asks('1', 'apply_patch', { input: patch })]).changed).toEqual(['src/a.ts', 'src/new.ts', 'src/old.ts', 'src/moved.ts']);
    expect(trailOf([asks('1', 'apply_patch', patch)]).changed).toEqual(['src/a.ts', 'src/new.ts', 'src/old.ts', 'src/moved.ts']);
  });

  it('carries an earlier trail forward: its facts first, each once', () => {
    const earlier: Trail = { ...emptyTrail(), read: ['src/a.ts'], commands: ['npm test → exit 1'], said: ['fix it'] };
    const trail = trailOf(
      [asks('1', 'read', { path: 'src/b.ts' }), asks('2', 'read', { path: 'src/a.ts' }), item('user', 'fix it')],
      earlier,
    );
    expect(trail).toEqual({ ...emptyTrail(), read: ['src/a.ts', 'src/b.ts'], commands: ['npm test → exit 1'], said: ['fix it'] });
    expect(earlier.read).toEqual(['src/a.ts']);
  });

  it('keeps the newest 200 facts of a list', () => {
    const trail = trailOf(Array.from({ length: 250 }, (_, i) => asks(String(i), 'read', { path: `src/f${i}.ts` })));
    expect(trail.read).toHaveLength(200);
    expect(trail.read[0]).toBe('src/f50.ts');
  });
});

describe('the trail as text', () => {
  const trail: Trail = {
    changed: ['src/b.ts'],
    read: ['src/a.ts', 'src/c.ts'],
    commands: ['npm test → exit 1'],
    errors: ['TypeError: x is not a function'],
    said: ["don't touch package.json"],
  };

  it('labelled lists of the facts, verbatim', () => {
    expect(trailText(trail, 10_000)).toBe(
      [
        '[trail of the condensed messages, read off them by the gateway]',
        'files changed: src/b.ts',
        'commands: `npm test → exit 1`',
        'errors: TypeError: x is not a function',
        'files read: src/a.ts, src/c.ts',
        `user said: "don't touch package.json"`,
      ].join('\n'),
    );
  });

  it('nothing to say, or no room for its title: empty', () => {
    expect(trailText(emptyTrail(), 10_000)).toBe('');
    expect(trailText(trail, 20)).toBe('');
  });

  it('within its bytes, each list shows its newest facts and says how many earlier ones it leaves out', () => {
    const many: Trail = { ...emptyTrail(), read: Array.from({ length: 100 }, (_, i) => `src/file${i}.ts`) };
    const text = trailText(many, 300);
    expect(escaped(text)).toBeLessThanOrEqual(300);
    const shown = /files read: \((\d+) earlier\), (.*)$/.exec(text.split('\n')[1]);
    expect(shown).not.toBeNull();
    const names = shown![2].split(', ');
    expect(Number(shown![1]) + names.length).toBe(100);
    expect(names.at(-1)).toBe('src/file99.ts');
  });

  it('never over its bytes, whatever the facts', () => {
    const facts = fc.array(fc.string({ maxLength: 80 }), { maxLength: 30 });
    fc.assert(
      fc.property(facts, facts, facts, fc.integer({ min: 0, max: 2000 }), (read, commands, said, maxBytes) => {
        expect(escaped(trailText({ ...emptyTrail(), read, commands, said }, maxBytes))).toBeLessThanOrEqual(maxBytes);
      }),
      { numRuns: 200, seed: 7 },
    );
  });
});

describe('the line a masked output keeps', () => {
  it('the command or paths of its call, the exit status and the first error it showed', () => {
    expect(resultLine(call('1', 'bash', { command: 'npm test' }), 'FAIL x\nError: boom\nExit code: 1')).toBe('npm test; exit 1; FAIL x');
    expect(resultLine(call('1', 'read_file', { path: 'src/a.ts' }), 'Error: in the file')).toBe('src/a.ts');
    expect(resultLine(undefined, 'whatever')).toBe('');
  });
});
