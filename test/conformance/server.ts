/**
 * `npm run conformance:server`: the real server (HTTP, Postgres task store, pg-boss workers) with the
 * conformance fixture registered through the public API, on HOST:PORT (embedded Postgres unless
 * DATABASE_URL is set).
 */
import { createServer, fromEnv } from '../../src/index.ts';
import { coerceError } from '../../src/log.ts';
import { CONFORMANCE_FIXTURE } from './fixture.ts';

const server = createServer({
  ...CONFORMANCE_FIXTURE,
  settings: fromEnv({
    EMBEDDED_PG_DIR: '.data/conformance-postgres',
    EMBEDDED_PG_PORT: '54359',
    ...process.env,
  }),
});
await server.start();
const stop = () => {
  server
    .stop()
    .then(() => process.exit(0))
    .catch((err: unknown) => {
      process.stderr.write(`shutdown failed: ${coerceError(err).message}\n`);
      process.exit(1);
    });
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
