import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/*
 * The tests `npm run mutate:core` runs against mutants: those that exercise the dialects, the
 * rescue core and the planner's shape in-process. Tests that spawn the built gateway (dist/) or a
 * container never see a mutant, so they are left out.
 */
export default defineConfig({
  test: {
    ...base.test,
    include: [
      'test/dialects/**/*.test.ts',
      'test/rescue/**/*.test.ts',
      'test/responses/**/*.test.ts',
      'test/memory/**/*.test.ts',
      'test/flows/clamp.test.ts',
      'test/flows/agent-sessions.test.ts',
      'test/flows/rescue-*.test.ts',
      'test/flows/compressed-errors.test.ts',
      'test/flows/body-bytes.test.ts',
      'test/reliability/bad-input-rescue.test.ts',
    ],
    setupFiles: ['test/helpers/fast-check-seed.ts'],
  },
});
