import { sql } from 'kysely';
import type { Config } from '../config.ts';
import { createDb, type Db, type ConnectionTimeouts } from '../db/database.ts';
import { startEmbeddedPostgres } from '../db/embedded.ts';
import { assertMigrated } from '../db/migrations.ts';
import type { Logger } from '../log.ts';
import type pg from 'pg';
import type { CleanupStack } from './cleanups.ts';
import type { Role } from './role.ts';

/** The process's connection to Postgres, and how every other pool of the process should connect. */
export interface DatabaseConnection {
  db: Db;
  pool: pg.Pool;
  /** For pools that run queries (through a pooler when one is configured). */
  connectionString: string;
  /** For migrations and LISTEN, which a transaction-mode pooler cannot carry. */
  directUrl: string;
  /** Named prepared statements (not through a transaction-mode pooler). */
  prepare: boolean;
  timeouts: ConnectionTimeouts;
  /** Ready when Postgres answers and the schema is migrated (for /readyz). */
  check(): Promise<undefined | 'schema'>;
}

/** Connects to DATABASE_URL, or starts the embedded Postgres when it is unset. */
export async function openDatabase(
  config: Config,
  log: Logger,
  role: Role,
  cleanups: CleanupStack,
): Promise<DatabaseConnection> {
  let connectionString = config.DATABASE_URL;
  let directUrl = config.DATABASE_DIRECT_URL ?? connectionString;
  if (connectionString === undefined) {
    if (directUrl !== undefined) throw new Error('DATABASE_DIRECT_URL is set but DATABASE_URL is not');
    const embedded = await startEmbeddedPostgres({
      dataDir: config.EMBEDDED_PG_DIR,
      port: config.EMBEDDED_PG_PORT,
      log,
    });
    cleanups.push(() => embedded.stop());
    connectionString = directUrl = embedded.connectionString;
  }
  if (directUrl === undefined) throw new Error('unreachable: no database URL');

  const timeouts = {
    statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
    lockTimeoutMs: config.DB_LOCK_TIMEOUT_MS,
    idleInTransactionTimeoutMs: config.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
  };
  // A transaction-mode pooler in front (DATABASE_DIRECT_URL set) cannot carry named statements.
  const prepare =
    config.DB_PREPARED_STATEMENTS === 'on' ||
    (config.DB_PREPARED_STATEMENTS === 'auto' && config.DATABASE_DIRECT_URL === undefined);
  const { db, pool } = createDb({
    connectionString,
    prepare,
    max: config.DB_POOL_MAX,
    applicationName: `durable-mcp-tasks:${role}`,
    connectTimeoutMs: config.DB_CONNECT_TIMEOUT_MS,
    timeouts,
  });
  cleanups.push(() => db.destroy());
  return {
    db,
    pool,
    connectionString,
    directUrl,
    prepare,
    timeouts,
    async check() {
      await sql`select 1`.execute(db);
      return assertMigrated(db).then(
        () => undefined,
        () => 'schema' as const,
      );
    },
  };
}
