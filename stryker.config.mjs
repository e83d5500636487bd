// Mutation testing of the core (issue 15): `npm run mutate`. Not part of `npm test`.
// Extend the mutated files here, or per run: `npm run mutate -- --mutate 'src/compaction/**/*.ts'`
// (add that folder's tests to TEST_FILES in stryker.vitest.config.ts as well).
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
};
