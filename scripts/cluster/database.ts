import pg from 'pg';
import { startPgBouncer, type RunningPgBouncer } from '../../test/helpers/pgbouncer.ts';

/** How the cluster's processes reach Postgres: directly, or through a real PgBouncer in transaction mode. */
export interface ClusterDatabase {
  /** The processes' database settings. */
  env: Record<string, string>;
  describe: string;
  stop(): Promise<void>;
}

/**
 * `CLUSTER_POOLER=pgbouncer` puts PgBouncer (transaction mode) between the processes and `dbUrl`, set
 * up as docs/postgres.md says: DATABASE_URL is the pooler, DATABASE_DIRECT_URL the database (LISTEN,
 * migrations), and the session timeouts are the role's. PgBouncer stays up while Postgres restarts.
 */
export async function clusterDatabase(
  dbUrl: string,
  pooler = process.env.CLUSTER_POOLER,
): Promise<ClusterDatabase> {
  if (pooler === undefined || pooler === '' || pooler === 'none') {
    return { env: { DATABASE_URL: dbUrl }, describe: 'direct', stop: async () => {} };
  }
  if (pooler !== 'pgbouncer') throw new Error(`CLUSTER_POOLER must be pgbouncer or none, not ${pooler}`);
  const database = new URL(dbUrl).pathname.slice(1);
  const admin = new pg.Client({ connectionString: dbUrl });
  await admin.connect();
  try {
    for (const [name, value] of [
      ['statement_timeout', '30s'],
      ['lock_timeout', '10s'],
      ['idle_in_transaction_session_timeout', '60s'],
    ]) {
      await admin.query(`alter role current_user in database "${database}" set ${name} = '${value}'`);
    }
  } finally {
    await admin.end();
  }
  const bouncer: RunningPgBouncer = await startPgBouncer({ upstream: dbUrl });
  return {
    env: {
      DATABASE_URL: bouncer.url(dbUrl),
      DATABASE_DIRECT_URL: dbUrl,
      DB_STATEMENT_TIMEOUT_MS: '0',
      DB_LOCK_TIMEOUT_MS: '0',
      DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '0',
    },
    describe: `through PgBouncer :${bouncer.port} (transaction mode)`,
    stop: () => bouncer.stop(),
  };
}
