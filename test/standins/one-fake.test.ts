import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

/*
 * One fake: every test, script and bench starts a provider through startStandIn (test/helpers/provider.ts),
 * the strict pieces being its options; none starts one directly, and nothing else defines a
 * startStandIn or a startFakeUpstream (test/helpers/fake-upstream.ts is the server the stand-in is
 * made of).
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PIECES = /\b(startStrict(?:Anthropic|Chat|Gemini|Responses)|startOllama|startLlamaCpp|startWindowedProvider|startHostileStandIn)\b/;
/** The files that define the pieces, and the one that starts them. */
const OWN = new Set([
  'test/helpers/provider.ts',
  'test/helpers/strict-anthropic.ts',
  'test/helpers/strict-chat.ts',
  'test/helpers/strict-gemini.ts',
  'test/helpers/strict-responses.ts',
  'test/helpers/strict-ollama.ts',
  'test/helpers/strict-llamacpp.ts',
  'test/helpers/windowed-provider.ts',
  'test/helpers/hostile-standin.ts',
]);

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'fixtures' ? [] : sources(path);
    return /\.(ts|mjs)$/.test(e.name) ? [path] : [];
  });
}

const files = [...sources('test'), ...sources('scripts'), ...sources('bench')].map((f) => relative(ROOT, join(ROOT, f)));

it('no test or script starts a strict piece but through startStandIn', () => {
  const direct = files
    .filter((f) => !OWN.has(f) && f !== 'test/standins/one-fake.test.ts')
    .filter((f) => PIECES.test(readFileSync(join(ROOT, f), 'utf8')));
  expect(direct).toEqual([]);
});

it('one startStandIn and one startFakeUpstream', () => {
  const defining = (name: string) =>
    files.filter((f) => new RegExp(`(function|const)\\s+${name}\\b`).test(readFileSync(join(ROOT, f), 'utf8')));
  expect(defining('startStandIn')).toEqual(['test/helpers/provider.ts']);
  expect(defining('startFakeUpstream')).toEqual(['test/helpers/fake-upstream.ts']);
});
