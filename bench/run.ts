import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PRESETS, runBench, type BenchOptions } from './harness.js';
import { AGENTS_END, AGENTS_START } from './agents.js';
import { stopAll } from './procs.js';
import { renderReport } from './report.js';
import { EVAL_END, EVAL_START, sectionOf } from '../scripts/eval/section.js';

/*
 * npm run bench [-- --quick] [-- --out FILE]
 * The full run writes BENCHMARKS.md at the repository root; --quick only prints (unless --out).
 */

const USAGE = 'usage: npm run bench [-- --quick] [-- --out FILE]';
/** Whatever happens, the run ends, and stops what it started (the children under tsx exit with it). */
const HARD_LIMIT_MS = 40 * 60_000;

async function main(argv: string[]): Promise<number> {
  const unknown = argv.filter((a, i) => !['--quick', '--out'].includes(a) && argv[i - 1] !== '--out');
  if (unknown.length > 0) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const quick = argv.includes('--quick');
  const outIndex = argv.indexOf('--out');
  const out = outIndex >= 0 ? argv[outIndex + 1] : quick ? undefined : fileURLToPath(new URL('../BENCHMARKS.md', import.meta.url));
  const options: BenchOptions = quick ? PRESETS.quick : PRESETS.full;

  const giveUp = (why: string) => {
    process.stderr.write(`bench: ${why}; stopping what it started\n`);
    void stopAll().finally(() => process.exit(1));
  };
  setTimeout(() => giveUp(`still running after ${HARD_LIMIT_MS / 1000} s`), HARD_LIMIT_MS).unref();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => giveUp(signal));

  const result = await runBench(options);
  const { markdown, verdicts } = renderReport(result);
  process.stdout.write(`${markdown}\n`);
  if (out) {
    writeFileSync(out, keepOwnSections(out, markdown));
    process.stderr.write(`bench: wrote ${out}\n`);
  }
  const missed = verdicts.filter((v) => !v.met);
  process.stderr.write(`bench: ${verdicts.length - missed.length} of ${verdicts.length} targets met in ${Math.round(result.elapsedS)} s\n`);
  return 0;
}

/** Figures measured by hand (dated, with their versions), which no command rewrites. */
const BY_HAND_START = '<!-- by hand start -->';
const BY_HAND_END = '<!-- by hand end -->';

/** The sections other commands write (`npm run bench:agents`, `npm run eval:summary -- --write`) and the one written by hand: a full run keeps them. */
function keepOwnSections(file: string, markdown: string): string {
  const old = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const kept = [
    sectionOf(old, AGENTS_START, AGENTS_END),
    sectionOf(old, EVAL_START, EVAL_END),
    sectionOf(old, BY_HAND_START, BY_HAND_END),
  ].filter((s) => s !== undefined);
  return kept.length > 0 ? `${[markdown.trimEnd(), ...kept].join('\n\n')}\n` : markdown;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`bench: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
