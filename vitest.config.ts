import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // test/system/ holds standalone programs (npm run test:cluster, …), run by node, never by vitest;
    // test/processes/ the tests that start several processes, run once by `npm run test:processes`.
    exclude: [...configDefaults.exclude, 'test/system/**', 'test/processes/**'],
    globalSetup: ['test/setup/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file gets its own database cloned from a migrated template; two at a time fits 2 cores.
    maxWorkers: 2,
  },
});
