import { sql, type Kysely } from 'kysely';
import { setTimeout as sleep } from 'node:timers/promises';
import { coerceError, type Logger } from '../log.ts';
import { isConnectionError, isRefusedStartupParameter } from './errors.ts';

/**
 * Waits until the database answers, retrying connection errors with backoff up to `timeoutMs`: a
 * process started while Postgres restarts (an orchestrator restarting both at once) waits for it
 * instead of exiting. Any other error, or the deadline, is thrown.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- only `select 1` is run
export async function waitForDatabase(db: Kysely<any>, log: Logger, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 100, warned = false; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      await sql`select 1`.execute(db);
      if (warned) log.info('database reachable');
      return;
    } catch (err) {
      if (isRefusedStartupParameter(err)) {
        throw new Error(
          `The database refused a startup parameter (${coerceError(err).message}). Behind a pooler such as ` +
            'PgBouncer, set DB_STATEMENT_TIMEOUT_MS=0, DB_LOCK_TIMEOUT_MS=0 and DB_IDLE_IN_TRANSACTION_TIMEOUT_MS=0 ' +
            'and set the timeouts on the role instead (ALTER ROLE … SET statement_timeout = …): see docs/postgres.md.',
          { cause: err },
        );
      }
      if (!isConnectionError(err) || Date.now() + delay > deadline) throw err;
      if (!warned) log.warn('waiting for the database', { error: coerceError(err).message });
      warned = true;
      await sleep(delay);
    }
  }
}
