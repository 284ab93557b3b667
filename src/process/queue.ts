import pg from 'pg';
import type { PgBoss } from 'pg-boss';
import type { Config } from '../config.ts';
import type { Metrics } from '../core/metrics.ts';
import { adaptToConnectionLimit } from '../db/connection-limit.ts';
import { isUnreachable } from '../db/wait.ts';
import { coerceError, type Logger } from '../log.ts';
import { createBoss, ensureRunQueue } from '../queue/boss.ts';
import type { CleanupStack } from './cleanups.ts';
import type { DatabaseConnection } from './database.ts';
import type { Role } from './role.ts';

/** Retries a start-up step while the database is unreachable (e.g. Postgres restarting meanwhile). */
export type StartupRetry = <T>(step: string, fn: () => Promise<T>) => Promise<T>;

/** Starts pg-boss on its own bounded pool and makes sure the run queue exists. */
export async function startQueue(
  conn: DatabaseConnection,
  {
    config,
    role,
    log,
    metrics,
    retry,
  }: { config: Config; role: Role; log: Logger; metrics: Metrics; retry: StartupRetry },
  cleanups: CleanupStack,
): Promise<PgBoss> {
  const boss = await retry('pg-boss', async () => {
    const b = createBoss({
      connectionString: conn.connectionString,
      max: config.QUEUE_POOL_MAX,
      prepare: conn.prepare,
      supervise: role !== 'server',
      timeouts: conn.timeouts,
      connectTimeoutMs: config.DB_CONNECT_TIMEOUT_MS,
      maintenanceIntervalSeconds: config.QUEUE_MAINTENANCE_INTERVAL_S,
    });
    b.on('error', (err) => log.error('pg-boss error', { error: coerceError(err).message }));
    try {
      await b.start();
      return b;
    } catch (err) {
      await b.stop({ graceful: false, close: true }).catch(() => {});
      if (isUnreachable(err)) throw err;
      throw new Error(
        `pg-boss: ${coerceError(err).message} (run \`durable-mcp-tasks migrate\` as the owner role)`,
        {
          cause: err,
        },
      );
    }
  });
  cleanups.push(() => boss.stop({ graceful: true, timeout: config.SHUTDOWN_GRACE_MS, close: true }));
  const bossPool = (boss.getDb() as { pool?: unknown }).pool;
  if (bossPool instanceof pg.Pool) {
    adaptToConnectionLimit(bossPool, { connectTimeoutMs: config.DB_CONNECT_TIMEOUT_MS });
    metrics.addPool('queue', bossPool);
  }
  await retry('run queue', () => ensureRunQueue(boss, config.QUEUE_JOB_RETENTION_S));
  return boss;
}
