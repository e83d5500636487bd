// `npm run lint` (with dependency-cruiser, knip and prettier): typescript-eslint's recommended
// rules, type-aware through tsconfig.check.json's program (the one `npm run typecheck` checks).
// typescript-eslint reads types with TypeScript 6's JavaScript API, which TypeScript 7 no longer
// ships: package.json installs `typescript` as @typescript/typescript6 for it, and the compiler
// itself (`tsc`) as @typescript/native.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'coverage/', 'reports/', '.stryker-tmp/', 'node_modules/'] },
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts', 'vitest.config.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { project: './tsconfig.check.json', tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true, caughtErrors: 'none', varsIgnorePattern: '^_$' }],
      // Off, each for a reason. The no-unsafe-* family flags every read of parsed JSON (4,000
      // findings, nearly all in tests reading response bodies); src has no `any` to guard.
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      // An async method with no await is how a synchronous store implements an async interface,
      // and how a fastify plugin or hook says it needs no `done`.
      '@typescript-eslint/require-await': 'off',
      // The dialects, stand-ins and stores are objects of plain functions that use no `this`.
      '@typescript-eslint/unbound-method': 'off',
      // Every control character in a regular expression here is meant: JSON and log escaping.
      'no-control-regex': 'off',
      // `unknown | null` says what a dialect's strip and mask return: null is "drop the item".
      '@typescript-eslint/no-redundant-type-constituents': 'off',
      // Node's listeners and fastify's hooks take async functions on purpose; each one catches
      // what it throws. A promise left floating is still an error (no-floating-promises).
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      // Error messages and reports stringify what they were given, whatever it is, on purpose:
      // String(unknown), `${header}` of a string | string[], text += Buffer.
      '@typescript-eslint/no-base-to-string': 'off',
      '@typescript-eslint/restrict-template-expressions': 'off',
      '@typescript-eslint/restrict-plus-operands': 'off',
      // A summarizer's abort rejects with the signal's own reason, as fetch does.
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
    },
  },
  {
    // Tests, benches and scripts read parsed bodies as `any`; src may not.
    files: ['test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['scripts/**/*.mjs', 'test/**/*.cjs'],
    extends: [js.configs.recommended],
    languageOptions: {
      globals: {
        URL: 'readonly',
        process: 'readonly',
        console: 'readonly',
        require: 'readonly',
        module: 'writable',
        __dirname: 'readonly',
      },
    },
  },
);
