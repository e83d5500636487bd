import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ENV_KEYS } from '../../src/config/load.js';
import { checkReport, preflight } from '../../src/process/preflight.js';
import { configInput, writeConfig, type ConfigInput } from '../helpers/config-shapes.js';
import { runGateway } from '../helpers/process.js';
import '../helpers/fast-check-seed.js';

// Whatever the config file and the environment hold, the gateway either starts (or --check
// reports) or says what is wrong, one line per mistake, naming the key and its variable: never a
// stack trace, never a line a quoted value breaks in two.

const SHIPPED = fileURLToPath(new URL('../../config/default.yaml', import.meta.url));
const VARIABLE_OF = new Map(ENV_KEYS.map(([name, path]) => [path, name]));
const ROOT_KEYS = [
  'server',
  'upstream',
  'upstreams',
  'defaultUpstream',
  'routes',
  'auth',
  'log',
  'compaction',
  'summarizer',
  'memory',
  'telemetry',
  'status',
];

/** What a problem line must be: one line, about a key (or the file, or a proxy variable), naming the key's variable. */
function expectOneLineNamingItsKey(line: string): void {
  expect(line).not.toMatch(/[\u0000-\u001f\u007f\u2028\u2029]/);
  expect(line).not.toMatch(/\n\s+at /);
  if (line.startsWith('refusing to start an open gateway: ')) return;
  const said = /^invalid configuration: (.+)$/.exec(line);
  expect(said, line).not.toBeNull();
  const problem = said![1];
  if (/^(config file |HTTPS?_PROXY: )/.test(problem)) return;
  const key = /^((?:[\w-]+|"(?:[^"\\]|\\.)*")(?:\.(?:[\w-]+|"(?:[^"\\]|\\.)*"))*)/.exec(problem)?.[1];
  expect(key, line).toBeDefined();
  if (!/: unknown key/.test(problem)) expect(ROOT_KEYS, line).toContain(key!.split('.')[0]);
  const variable = VARIABLE_OF.get(key!);
  if (variable) expect(problem, line).toMatch(new RegExp(`^${key!.replace(/\./g, '\\.')} \\((from|or) `));
}

async function judged(input: ConfigInput, file = writeConfig(input)): Promise<string[] | 'valid'> {
  const checked = preflight(['--config', file], input.env, SHIPPED);
  if ('problems' in checked) return checked.problems;
  await checkReport(checked.config, checked.source, input.env, { gateway: 'test', node: process.version });
  return 'valid';
}

describe('a config of any shape', () => {
  it('is valid, or refused with one line per mistake naming its key and variable (in-process)', async () => {
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(configInput, async (input) => {
        const verdict = await judged(input);
        if (verdict === 'valid') return;
        refused++;
        expect(verdict.length).toBeGreaterThan(0);
        for (const line of verdict) expectOneLineNamingItsKey(line);
      }),
      { numRuns: 1500 },
    );
    // The generator makes mistakes most of the time: the property is about refusals.
    expect(refused).toBeGreaterThan(750);
  }, 60_000);

  it('refused by the built process: exit 2, the same lines, no stack trace, never listening', async () => {
    const refusedInputs: Array<{ input: ConfigInput; file: string; lines: string[] }> = [];
    for (const input of fc.sample(configInput, { numRuns: 200, seed: 46 })) {
      const file = writeConfig(input);
      const verdict = await judged(input, file);
      if (verdict !== 'valid' && refusedInputs.length < 6) refusedInputs.push({ input, file, lines: verdict });
    }
    expect(refusedInputs).toHaveLength(6);
    await Promise.all(
      refusedInputs.map(async ({ input, file, lines }) => {
        const proc = runGateway(['--config', file], input.env);
        const exit = await proc.exitWithin(10_000);
        if (exit === 'still running') proc.child.kill('SIGKILL');
        expect(exit).toMatchObject({ code: 2 });
        const out = proc.output().split('\n').filter(Boolean);
        const problems = out.filter((l) => !l.startsWith('compaction-gateway: warning: '));
        expect(problems).toEqual(lines.map((l) => `compaction-gateway: ${l}`));
        expect(proc.output()).not.toMatch(/\n\s+at |Server listening/);
      }),
    );
  }, 60_000);
});
