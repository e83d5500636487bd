import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/*
 * The tests `npm run mutate:core` runs against mutants: the dialect, compaction and rescue tests,
 * which call the dialects, the compaction core and the rescue core in-process (the rescue ones
 * against a fake upstream on a loopback socket). The gateway scenario files (test/flows,
 * test/scenarios) are left out on purpose: each mutant would reload a dozen of them, about 20 s a
 * mutant on two shared cores, hours a run.
 */

/**
 * Pure unit tests first: a mutant they kill stops the run (bail) before the property tests and the
 * 7 MB conversation (seconds each) run, or any socket is opened.
 */
class UnitTestsFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) =>
      /[\\/](serve|memory-ahead)\.test\.ts$/.test(f.moduleId) ? 2 : /[\\/](big|[\w-]+\.property)\.test\.ts$/.test(f.moduleId) ? 1 : 0;
    return [...files].sort((a, b) => rank(a) - rank(b) || a.moduleId.localeCompare(b.moduleId));
  }
}

export default defineConfig({
  test: {
    ...base.test,
    include: ['test/dialects/**/*.test.ts', 'test/compaction/**/*.test.ts', 'test/rescue/**/*.test.ts'],
    setupFiles: ['test/helpers/fast-check-seed.ts'],
    sequence: { sequencer: UnitTestsFirst },
  },
});
