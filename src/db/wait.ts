import { sql, type Kysely } from 'kysely';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { coerceError, type Logger } from '../log.ts';
import { isConnectionError, isRefusedStartupParameter } from './errors.ts';

/** A connection error on the error itself or on its cause (pg-boss and the migrator wrap what pg said). */
export function isUnreachable(err: unknown): boolean {
  return isConnectionError(err) || isConnectionError((err as { cause?: unknown } | null)?.cause);
}

/**
 * Runs a start-up step, retrying it with backoff while the database cannot be reached, until
 * `deadline` (ms since the epoch): a process started while Postgres restarts (an orchestrator
 * restarting both at once) waits for it instead of exiting, whichever step the outage hits. Any other
 * error, or the deadline, is thrown. Steps must be safe to run again (they are: migrations take locks
 * and are idempotent, the rest are reads or upserts).
 */
export async function retryWhileUnreachable<T>(
  step: string,
  fn: () => Promise<T>,
  { log, deadline }: { log: Logger; deadline: number },
): Promise<T> {
  for (let delay = 100, warned = false; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      const value = await fn();
      if (warned) log.info('database reachable', { step });
      return value;
    } catch (err) {
      if (isRefusedStartupParameter(err)) {
        throw new Error(
          `The database refused a startup parameter (${coerceError(err).message}). Behind a pooler such as ` +
            'PgBouncer, set DB_STATEMENT_TIMEOUT_MS=0, DB_LOCK_TIMEOUT_MS=0 and DB_IDLE_IN_TRANSACTION_TIMEOUT_MS=0 ' +
            'and set the timeouts on the role instead (ALTER ROLE … SET statement_timeout = …): see docs/postgres.md.',
          { cause: err },
        );
      }
      if (!isUnreachable(err) || Date.now() + delay > deadline) throw err;
      if (!warned) log.warn('waiting for the database', { step, error: coerceError(err).message });
      warned = true;
      await sleep(delay);
    }
  }
}

/** Waits until the database answers `select 1` (see retryWhileUnreachable). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- only `select 1` is run
export async function waitForDatabase(db: Kysely<any>, log: Logger, timeoutMs = 60_000): Promise<void> {
  await retryWhileUnreachable('connect', () => sql`select 1`.execute(db), {
    log,
    deadline: Date.now() + timeoutMs,
  });
}

/**
 * Opens (and closes) a connection every `intervalMs` until one succeeds, for a server that is starting
 * (a new postmaster, a pooler reloading its users), where any error may pass: unlike retryWhileUnreachable,
 * which retries only connection errors. Throws the last error once `timeoutMs` have passed, or at once
 * when `keepTrying()` turns false (the server died).
 */
export async function connectUntilReady(
  connectionString: string,
  {
    timeoutMs,
    intervalMs = 100,
    keepTrying = () => true,
  }: { timeoutMs: number; intervalMs?: number; keepTrying?: () => boolean },
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString });
    client.on('error', () => {}); // a failure surfaces through connect()
    try {
      await client.connect();
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => {});
      if (!keepTrying() || Date.now() > deadline) throw err;
      await sleep(intervalMs);
    }
  }
}
