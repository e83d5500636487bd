import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/*
 * The tests `npm run mutate:core` runs against mutants: those that exercise the dialects, the
 * rescue core and the planner's shape in-process. Tests that spawn the built gateway (dist/) or a
 * container never see a mutant, so they are left out, and so are the slowest scenario files
 * (the recorded agent sessions, the 7 MB body, Redis), which add minutes and pin nothing the
 * others do not. test/compaction/ joins once its rewrite for the dialect API lands.
 */

/** Unit tests first: a mutant they kill stops the run (bail) before any gateway starts. */
class UnitTestsFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => (/[\\/]test[\\/](dialects|rescue)[\\/]/.test(f.moduleId) ? 0 : 1);
    return [...files].sort((a, b) => rank(a) - rank(b) || a.moduleId.localeCompare(b.moduleId));
  }
}

export default defineConfig({
  test: {
    ...base.test,
    include: [
      'test/dialects/**/*.test.ts',
      'test/rescue/**/*.test.ts',
      'test/responses/**/*.test.ts',
      'test/memory/turns.test.ts',
      'test/memory/proactive-rejected.test.ts',
      'test/flows/clamp.test.ts',
      'test/flows/rescue-abort.test.ts',
      'test/flows/rescue-opt-out.test.ts',
      'test/flows/rescue-replay.test.ts',
      'test/flows/rescue-replay-fails.test.ts',
      'test/flows/rescue-stream-started.test.ts',
      'test/flows/rescue-summarizer-fails.test.ts',
      'test/flows/compressed-errors.test.ts',
      'test/reliability/bad-input-rescue.test.ts',
    ],
    setupFiles: ['test/helpers/fast-check-seed.ts'],
    sequence: { sequencer: UnitTestsFirst },
  },
});
