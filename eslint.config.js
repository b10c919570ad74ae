// ESLint for the TypeScript of the product (src/), the harness and the tests: the recommended
// JavaScript and typescript-eslint rules, and a handful of stylistic ones that hold the code's
// existing conventions (single quotes, semicolons, no trailing spaces) in place of a formatter
// that would re-wrap every long line. `npm run lint`; CI runs it before the tests.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import stylistic from '@stylistic/eslint-plugin';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'native/build/**', 'harness/bench/results/**', 'harness/k8s/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.js'],
    plugins: { '@stylistic': stylistic },
    rules: {
      '@stylistic/quotes': ['error', 'single', { avoidEscape: true, allowTemplateLiterals: 'always' }],
      '@stylistic/semi': ['error', 'always'],
      '@stylistic/no-trailing-spaces': 'error',
      '@stylistic/eol-last': 'error',
      '@stylistic/indent': ['error', 2, { SwitchCase: 1, ignoredNodes: ['TemplateLiteral *', 'ConditionalExpression *'] }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
      'no-constant-condition': ['error', { checkLoops: false }],
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  {
    files: ['**/*.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
  {
    // Tests and the harness read JSON answers of the API and of kubectl as they come.
    files: ['test/**/*.ts', 'harness/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
