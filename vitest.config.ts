import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // test/system/ holds standalone programs (npm run test:cluster, …), run by node, never by vitest.
    exclude: [...configDefaults.exclude, 'test/system/**'],
    globalSetup: ['test/setup/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file gets its own database cloned from a migrated template; two at a time fits 2 cores.
    maxWorkers: 2,
  },
});
