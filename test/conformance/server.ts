/**
 * `npm run conformance:server`: the real server (HTTP, Postgres task store, pg-boss workers) with the
 * conformance fixture registered, on HOST:PORT (embedded Postgres unless DATABASE_URL is set).
 */
import { loadConfig } from '../../src/config.ts';
import { coerceError, createLogger } from '../../src/log.ts';
import { startRuntime } from '../../src/runtime.ts';
import { CONFORMANCE_FIXTURE } from './fixture.ts';

const config = loadConfig({
  EMBEDDED_PG_DIR: '.data/conformance-postgres',
  EMBEDDED_PG_PORT: '54359',
  ...process.env,
});
const runtime = await startRuntime({
  config,
  log: createLogger(config.LOG_LEVEL),
  role: 'all',
  ...CONFORMANCE_FIXTURE,
});
const stop = () => {
  runtime
    .stop()
    .then(() => process.exit(0))
    .catch((err: unknown) => {
      process.stderr.write(`shutdown failed: ${coerceError(err).message}\n`);
      process.exit(1);
    });
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
