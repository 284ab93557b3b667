import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { ServerSecretsTable } from './server-secrets.table.ts';
import type { TaskInputRequestsTable } from './task-input-requests.table.ts';
import type { TaskStepsTable } from './task-steps.table.ts';
import type { TasksTable } from './tasks.table.ts';

export interface Database {
  tasks: TasksTable;
  task_input_requests: TaskInputRequestsTable;
  task_steps: TaskStepsTable;
  server_secrets: ServerSecretsTable;
}

export type Db = Kysely<Database>;

export interface DbOptions {
  connectionString: string;
  max?: number;
  applicationName?: string;
  /** How long to wait for a connection before failing the query (an unreachable database fails fast). */
  connectTimeoutMs?: number;
}

/** One bounded pg pool behind Kysely; `pool` is exposed for pg-boss and LISTEN clients. */
export function createDb({
  connectionString,
  max = 10,
  applicationName = 'durable-mcp-tasks',
  connectTimeoutMs = 5_000,
}: DbOptions): {
  db: Db;
  pool: pg.Pool;
} {
  const pool = new pg.Pool({
    connectionString,
    max,
    application_name: applicationName,
    connectionTimeoutMillis: connectTimeoutMs,
    keepAlive: true,
  });
  // An idle client's connection error (e.g. Postgres restarted) must not crash the process.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, pool };
}
