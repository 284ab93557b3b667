import path from 'node:path';
import { configDefaults, defineConfig } from 'vitest/config';
import suite from '../../vitest.config.ts';

/**
 * `npm run test:processes`: the tests in this folder start several processes (a cluster behind nginx,
 * worker processes SIGKILLed, a Postgres of their own stopped and restarted, `npm start`). `.ci/run` runs
 * them once, on the machine's Postgres, in its system stage; `npm test` leaves them out. The suite's setup
 * otherwise: the same template database, timeouts and workers.
 */
export default defineConfig({
  test: {
    ...suite.test,
    root: path.resolve(import.meta.dirname, '../..'),
    include: ['test/processes/**/*.test.ts'],
    exclude: [...configDefaults.exclude],
  },
});
