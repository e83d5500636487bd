import { defineConfig } from 'vitest/config';

/**
 * The tests that pin the mutated core (see stryker.config.mjs). A config of its own rather
 * than a merge with vitest.config.ts: mergeConfig would append to `include`, not replace it.
 */
const TEST_FILES = ['test/overlong/**/*.test.ts', 'test/flows/upstream-errors-e2e.test.ts'];

export default defineConfig({
  test: {
    include: TEST_FILES,
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // Property tests draw the same cases on every mutant, so a kill or a survival is reproducible.
    setupFiles: ['test/overlong/fast-check-seed.ts'],
  },
});
