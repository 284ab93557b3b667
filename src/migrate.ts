import { createDb } from './db/database.ts';
import { grantRuntimeRole } from './db/grants.ts';
import { migrateToLatest } from './db/migrations.ts';
import { waitForDatabase } from './db/wait.ts';
import { coerceError, type Logger } from './log.ts';
import { createBoss, ensureRunQueue } from './queue/boss.ts';

export interface MigrateOptions {
  /** A direct connection (not through a transaction-mode pooler) as the role that owns the schema. */
  connectionString: string;
  log: Logger;
  /** The runtime role to grant DML on every table (`DB_APP_ROLE`), when it is not the owner. */
  appRole?: string | undefined;
  /** How long to wait for an unreachable database first. */
  startupTimeoutMs?: number;
}

// No statement timeout for DDL: a migration may legitimately run long.
const NO_TIMEOUTS = { statementTimeoutMs: 0, lockTimeoutMs: 0, idleInTransactionTimeoutMs: 0 };

/**
 * Brings the database up to date: our migrations, pg-boss's schema and the run queue, then the runtime
 * role's grants. Safe when several processes run it at once (advisory locks serialize both migrators).
 * Session-level advisory locks need one session throughout: hence a direct connection.
 */
export async function migrateDatabase({
  connectionString,
  log,
  appRole,
  startupTimeoutMs = 60_000,
}: MigrateOptions): Promise<void> {
  const { db } = createDb({
    connectionString,
    max: 1,
    applicationName: 'durable-mcp-tasks:migrate',
    timeouts: NO_TIMEOUTS,
  });
  try {
    await waitForDatabase(db, log, startupTimeoutMs);
    await migrateToLatest(db);
    const boss = createBoss({ connectionString, max: 1, migrate: true, timeouts: NO_TIMEOUTS });
    boss.on('error', (err) => log.warn('pg-boss error while migrating', { error: coerceError(err).message }));
    try {
      await boss.start();
      await ensureRunQueue(boss);
    } finally {
      await boss.stop({ graceful: false, close: true });
    }
    if (appRole !== undefined) await grantRuntimeRole(db, appRole);
  } catch (err) {
    if (!isPermissionDenied(err)) throw err;
    throw new Error(
      `${coerceError(err).message}: this role may not change the schema. Run \`durable-mcp-tasks migrate\` as the ` +
        'owner role, and start the server and workers with MIGRATE_ON_START=false.',
      { cause: err },
    );
  } finally {
    await db.destroy();
  }
}

/** SQLSTATE 42501, on the error or on its cause (the migrator wraps what the database said). */
function isPermissionDenied(err: unknown): boolean {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  return e?.code === '42501' || e?.cause?.code === '42501';
}
