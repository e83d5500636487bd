// Mutation testing of the classifier: `npm run mutate`. Not part of `npm test`.
// Extend the mutated files here, or per run: `npm run mutate -- --mutate 'src/compaction/**/*.ts'`
// (add that folder's tests to TEST_FILES in stryker.vitest.config.ts as well).

/** A run narrowed with `--mutate` looks at some files; only a run over them all is held to `break`. */
const narrowed = process.argv.some((a) => a === '-m' || a === '--mutate' || a.startsWith('--mutate='));

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'stryker.vitest.config.ts', related: false },
  mutate: ['src/overlong/**/*.ts'],
  // TypeScript 7 has no JS API: no type-checker plugin, and no tsconfig rewriting
  // (pointing tsconfigFile at a file that does not exist switches the preprocessor off).
  checkers: [],
  tsconfigFile: 'stryker-has-no-tsconfig.json',
  coverageAnalysis: 'perTest',
  concurrency: 2,
  incremental: true,
  incrementalFile: 'reports/stryker-incremental.json',
  reporters: ['html', 'json', 'clear-text', 'progress'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  // Mutants that break a bound loop until this; a hostile-body test then "times out" (a kill).
  timeoutMS: 3000,
  // The score over every file of src/overlong: a run that ends under `break` exits 1. Set just
  // under the last full run's score; after a full run, move it to just under the new score.
  thresholds: { high: 95, low: 90, break: narrowed ? null : 89 },
};
