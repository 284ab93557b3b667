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
  // A connection error (Postgres restarted, a backend terminated) must never crash the process. The
  // pool's own listener covers idle clients only: pg-pool removes it while a client is checked out,
  // and a client whose socket dies then emits 'error' even if a query is running (the query fails
  // with it too). So every client gets a permanent listener of its own; the pool drops broken clients
  // on release, and the failed query becomes -32603 for its request.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, pool };
}
