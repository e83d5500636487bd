// Mutation testing of the dialects, the rescue core and the compaction core: `npm run mutate:core`.
// Stryker 9.6 (the last line that runs on Node 20) with its vitest runner, which runs only the
// tests that cover each mutant. TypeScript 7 has no JS API, so the TypeScript checker is off and
// `tsconfigFile` names no file, which keeps Stryker from rewriting (and parsing) tsconfig.json.

/** A run narrowed with `--mutate` looks at some files; only a run over them all is held to `break`. */
const narrowed = process.argv.some((a) => a === '-m' || a === '--mutate' || a.startsWith('--mutate='));

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  plugins: ['@stryker-mutator/vitest-runner'],
  vitest: { configFile: 'vitest.mutate-core.config.ts', related: true },
  coverageAnalysis: 'perTest',
  checkers: [],
  tsconfigFile: 'stryker-has-no-tsconfig.json',
  mutate: [
    'src/dialects/chat.ts',
    'src/dialects/responses.ts',
    'src/dialects/parts.ts',
    'src/rescue/report.ts',
    'src/rescue/context.ts',
    'src/rescue/request.ts',
    'src/rescue/index.ts',
    'src/rescue/memory.ts',
    'src/rescue/compact.ts',
    'src/rescue/proactive.ts',
    'src/rescue/identity.ts',
    'src/rescue/summarizer-client.ts',
    'src/compaction/conversation.ts',
    'src/compaction/validate.ts',
    'src/compaction/plan.ts',
    'src/compaction/shrink.ts',
    'src/compaction/fallback.ts',
    'src/compaction/size-target.ts',
    'src/compaction/index.ts',
    'src/compaction/span.ts',
    'src/compaction/condense.ts',
    'src/compaction/finish.ts',
    'src/compaction/result.ts',
    'src/compaction/size.ts',
    'src/compaction/summary-pass.ts',
    'src/compaction/call-budget.ts',
    'src/compaction/summarizer-port.ts',
    'src/compaction/recalled.ts',
    'src/dialects/messages.ts',
  ],
  ignorePatterns: ['dist', 'coverage', 'reports', 'bench', 'deploy', '.stryker-tmp'],
  incremental: true,
  incrementalFile: 'reports/stryker-incremental-core.json',
  reporters: ['html', 'json', 'clear-text', 'progress'],
  htmlReporter: { fileName: 'reports/mutation-core/index.html' },
  jsonReporter: { fileName: 'reports/mutation-core/mutation.json' },
  // Two shared cores, other work on them too: at most two sandboxes.
  concurrency: 2,
  timeoutMS: 10_000,
  // The score over every file above: a run that ends under `break` exits 1. Set just under the
  // scores of the last runs; after a full run, move it to just under the new score.
  thresholds: { high: 95, low: 90, break: narrowed ? null : 89 },
  tempDirName: '.stryker-tmp/core',
  cleanTempDir: true,
};
