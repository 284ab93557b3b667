// @ts-check
import tseslint from 'typescript-eslint';
import { layersPlugin } from './eslint-layers.js';

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', 'results/**', 'dist/**'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      // Method handlers are async by contract even when they need no await.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // The folder graph of src/ is one-way (eslint-layers.js).
    files: ['src/**'],
    plugins: { layers: layersPlugin },
    rules: {
      'layers/one-way': 'error',
      // A function a reader can hold (Hono and Kysely rarely pass 50 lines): split longer ones along their concerns.
      'max-lines-per-function': ['error', { max: 80 }],
    },
  },
  {
    // Migrations are typed Kysely<any> on purpose: they must not depend on today's types.
    files: ['migrations/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Tests read untyped wire JSON on purpose: asserting on it is their job.
    files: ['test/**', 'bench/**', 'scripts/**'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
    },
  },
  {
    files: ['eslint.config.js', 'eslint-layers.js'],
    ...tseslint.configs.disableTypeChecked,
  },
);
