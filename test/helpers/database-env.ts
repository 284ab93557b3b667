import { appendFileSync } from 'node:fs';
import { inject } from 'vitest';
import { connectUntilReady } from '../../src/db/wait.ts';

/** Whether this run goes through PgBouncer in transaction mode (TEST_PGBOUNCER=1). */
export const throughPooler = (): boolean => inject('pooler') !== undefined;

/**
 * Where a cluster a test file starts keeps its data (startCluster's `postgres` and `pooler`): a copy of
 * the suite's migrated template on the test server, through PgBouncer when the suite is.
 */
export const suiteClusterDatabase = () => ({
  postgres: { server: inject('adminUrl'), template: inject('templateDb') },
  pooler: throughPooler() ? ('pgbouncer' as const) : ('none' as const),
});

const sameServer = (a: URL, b: URL) => a.hostname === b.hostname && (a.port || '5432') === (b.port || '5432');

/**
 * The environment a server or worker process gets for a database of the test Postgres. Through
 * PgBouncer, as documented for production: DATABASE_URL is the pooler, DATABASE_DIRECT_URL the
 * database itself (LISTEN, migrations), and the session timeouts are the role's (set by
 * createTestDatabase), since the pooler refuses the startup parameter. A database on another server
 * (a test's private Postgres) is reached directly.
 */
export function databaseEnv(url: string): Record<string, string> {
  const pooler = inject('pooler');
  const target = new URL(url);
  if (pooler === undefined || !sameServer(target, new URL(inject('adminUrl')))) return { DATABASE_URL: url };
  const pooled = new URL(url);
  pooled.hostname = '127.0.0.1';
  pooled.port = String(pooler.port);
  return {
    DATABASE_URL: pooled.toString(),
    DATABASE_DIRECT_URL: url,
    DB_STATEMENT_TIMEOUT_MS: '0',
    DB_LOCK_TIMEOUT_MS: '0',
    DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '0',
  };
}

/** Lets a role a test created through PgBouncer (its auth_file lists every role that may pass). */
export async function allowPoolerUser(role: string, password: string, database: string): Promise<void> {
  const pooler = inject('pooler');
  if (pooler === undefined) return;
  appendFileSync(pooler.userlist, `"${role}" "${password}"\n`);
  process.kill(pooler.pid, 'SIGHUP');
  const url = new URL(databaseEnv(inject('adminUrl')).DATABASE_URL!);
  url.username = role;
  url.password = password;
  url.pathname = `/${database}`;
  // PgBouncer reloads its auth_file on SIGHUP in its own time: wait until the role gets in.
  await connectUntilReady(url.toString(), { timeoutMs: 10_000, intervalMs: 50 });
}
