import pg from 'pg';
import { waitFor } from './wait.ts';

/** What Postgres counted in one database: commits, and scans of the tasks table (each read of tasks). */
export interface DbActivity {
  commits: number;
  taskScans: number;
}

/**
 * The database's counters once every other connection to it has closed. A backend reports its counts
 * lazily (up to seconds later) but always when it exits: so stop the processes using the database, then
 * read. A pooler (PgBouncer) keeps its server connections after its clients left: those are ended here,
 * so call this only once nothing uses the database. The reading connection's own few statements are
 * counted in a later reading.
 */
export async function settledDbActivity(databaseUrl: string): Promise<DbActivity> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(
      `select pg_terminate_backend(pid) from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid()`,
    );
    await waitFor(
      async () => {
        const { rows } = await client.query<{ n: string }>(
          `select count(*) as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
        );
        return rows[0]?.n === '0';
      },
      { what: 'every other connection to the database closing' },
    );
    await client.query('select pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ commits: string; task_scans: string }>(
      `select (select xact_commit from pg_stat_database where datname = current_database()) as commits,
              (select coalesce(seq_scan, 0) + coalesce(idx_scan, 0) from pg_stat_user_tables
                where relname = 'tasks' and schemaname = current_schema()) as task_scans`,
    );
    return { commits: Number(rows[0]?.commits), taskScans: Number(rows[0]?.task_scans) };
  } finally {
    await client.end();
  }
}
