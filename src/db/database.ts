import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { adaptToConnectionLimit } from './connection-limit.ts';
import { nameStatements } from './prepared.ts';
import type { DashboardSessionsTable } from './dashboard-sessions.table.ts';
import type { PrincipalActiveTasksTable } from './principal-active-tasks.table.ts';
import type { PrincipalCreationBucketsTable } from './principal-creation-buckets.table.ts';
import type { SchedulesTable } from './schedules.table.ts';
import type { ServerSecretsTable } from './server-secrets.table.ts';
import type {
  SessionEventsTable,
  SessionInputDeliveriesTable,
  SessionResponsesTable,
  SessionsTable,
  SessionSubscriptionsTable,
} from './sessions.table.ts';
import type { TaskActionsTable } from './task-actions.table.ts';
import type { TaskArtifactChunksTable, TaskArtifactsTable } from './task-artifacts.table.ts';
import type { TaskInputRequestsTable } from './task-input-requests.table.ts';
import type { TaskAttemptsTable } from './task-attempts.table.ts';
import type { TaskEventsTable } from './task-events.table.ts';
import type { TaskRateStartsTable } from './task-rate-starts.table.ts';
import type { TaskSignalsTable } from './task-signals.table.ts';
import type { TaskSteeringTable } from './task-steering.table.ts';
import type { TaskStepFailuresTable } from './task-step-failures.table.ts';
import type { TaskStepStartsTable } from './task-step-starts.table.ts';
import type { TaskStepsTable } from './task-steps.table.ts';
import type { TasksTable } from './tasks.table.ts';

export interface Database {
  tasks: TasksTable;
  task_attempts: TaskAttemptsTable;
  task_input_requests: TaskInputRequestsTable;
  task_steps: TaskStepsTable;
  task_signals: TaskSignalsTable;
  task_step_failures: TaskStepFailuresTable;
  task_step_starts: TaskStepStartsTable;
  task_artifacts: TaskArtifactsTable;
  task_artifact_chunks: TaskArtifactChunksTable;
  task_actions: TaskActionsTable;
  task_events: TaskEventsTable;
  task_steering: TaskSteeringTable;
  task_rate_starts: TaskRateStartsTable;
  server_secrets: ServerSecretsTable;
  mcp_sessions: SessionsTable;
  mcp_session_subscriptions: SessionSubscriptionsTable;
  mcp_session_events: SessionEventsTable;
  mcp_session_responses: SessionResponsesTable;
  mcp_session_input_deliveries: SessionInputDeliveriesTable;
  principal_creation_buckets: PrincipalCreationBucketsTable;
  principal_active_tasks: PrincipalActiveTasksTable;
  dashboard_sessions: DashboardSessionsTable;
  schedules: SchedulesTable;
}

export type Db = Kysely<Database>;

/** Server-side limits set on each of the process's database connections, in ms; 0 turns one off. */
export interface ConnectionTimeouts {
  /** A statement running longer is cancelled (a stuck query cannot hold its locks forever). */
  statementTimeoutMs?: number;
  /** A statement waiting longer for a lock fails instead of queueing behind a stuck transaction. */
  lockTimeoutMs?: number;
  /** A connection idle inside an open transaction longer (a client that died mid-transaction) is ended. */
  idleInTransactionTimeoutMs?: number;
}

/**
 * The `options` startup parameter that sets these timeouts on every connection of a pool; only the
 * ones that are on. With all three 0 nothing is sent: poolers such as PgBouncer refuse the parameter
 * (set the timeouts on the role there instead).
 */
export function connectionOptions({
  statementTimeoutMs = 30_000,
  lockTimeoutMs = 10_000,
  idleInTransactionTimeoutMs = 60_000,
}: ConnectionTimeouts = {}): string | undefined {
  const settings = [
    ['statement_timeout', statementTimeoutMs],
    ['lock_timeout', lockTimeoutMs],
    ['idle_in_transaction_session_timeout', idleInTransactionTimeoutMs],
  ] as const;
  const on = settings.filter(([, ms]) => ms > 0).map(([name, ms]) => `-c ${name}=${ms}`);
  return on.length > 0 ? on.join(' ') : undefined;
}

export interface DbOptions {
  connectionString: string;
  timeouts?: ConnectionTimeouts;
  max?: number;
  applicationName?: string;
  /** How long to wait for a connection before failing the query (an unreachable database fails fast). */
  connectTimeoutMs?: number;
  /** Repeated statements become named prepared statements (off behind a transaction-mode pooler). */
  prepare?: boolean;
}

/**
 * A pg client that a connection error (Postgres restarted, a backend terminated) can never turn into
 * an uncaught exception. A pool's own 'error' listener covers idle clients only: pg-pool removes it
 * while a client is checked out, and a client whose socket dies then emits 'error' even while a query
 * runs (the query fails with it too). So every client listens for its whole life, from its
 * construction; the pool drops a broken client on release, and the failed query becomes -32603 for its
 * request. Every pool the process owns uses it: ours, and pg-boss's (through its `Client` option).
 */
export class GuardedClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    this.on('error', () => {});
  }
}

/** A GuardedClient whose repeated statements are named prepared statements (see prepared.ts). */
export class PreparingClient extends GuardedClient {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    nameStatements(this);
  }
}

/** One bounded pg pool behind Kysely; `pool` is exposed for pg-boss and LISTEN clients. */
export function createDb({
  connectionString,
  max = 10,
  applicationName = 'durable-mcp-tasks',
  connectTimeoutMs = 5_000,
  timeouts,
  prepare = false,
}: DbOptions): {
  db: Db;
  pool: pg.Pool;
} {
  const pool = new pg.Pool({
    Client: prepare ? PreparingClient : GuardedClient,
    connectionString,
    max,
    application_name: applicationName,
    connectionTimeoutMillis: connectTimeoutMs,
    keepAlive: true,
    options: connectionOptions(timeouts),
  });
  pool.on('error', () => {});
  adaptToConnectionLimit(pool, { connectTimeoutMs });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, pool };
}
