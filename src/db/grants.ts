import { sql, type Kysely } from 'kysely';

/** The tables our migrations create; the runtime role reads and writes each of them. */
export const APP_TABLES = [
  'tasks',
  'task_input_requests',
  'task_steps',
  'task_signals',
  'task_step_failures',
  'task_step_starts',
  'task_artifacts',
  'task_artifact_chunks',
  'task_attempts',
  'task_actions',
  'task_events',
  'task_steering',
  'task_rate_starts',
  'server_secrets',
  'mcp_sessions',
  'mcp_session_subscriptions',
  'mcp_session_events',
  'mcp_session_responses',
  'mcp_session_input_deliveries',
  'principal_creation_buckets',
  'principal_active_tasks',
  'dashboard_sessions',
  'schedules',
] as const;

/**
 * Grants a runtime role what the server and the workers need, and nothing that changes the schema:
 * DML on our tables and pg-boss's, pg-boss's functions, and a read of the migration log (a process
 * started with MIGRATE_ON_START=false checks that the schema is current). Idempotent; run after every
 * migration, so tables a later version adds are granted too.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- grants name tables, not typed rows
export async function grantRuntimeRole(db: Kysely<any>, role: string, bossSchema = 'pgboss'): Promise<void> {
  const { rows } = await sql<{ name: string }>`select current_schema() as name`.execute(db);
  const schema = rows[0]?.name ?? 'public';
  const r = sql.id(role);
  const boss = sql.id(bossSchema);
  const tables = sql.join(APP_TABLES.map((t) => sql.id(schema, t)));
  await sql`grant usage on schema ${sql.id(schema)}, ${boss} to ${r}`.execute(db);
  await sql`grant select, insert, update, delete on ${tables} to ${r}`.execute(db);
  await sql`grant select on ${sql.id(schema, 'kysely_migration')} to ${r}`.execute(db);
  await sql`grant select, insert, update, delete on all tables in schema ${boss} to ${r}`.execute(db);
  await sql`grant usage, select on all sequences in schema ${boss} to ${r}`.execute(db);
  await sql`grant usage on ${sql.id(schema, 'mcp_session_events_event_id_seq')} to ${r}`.execute(db);
  await sql`grant execute on all functions in schema ${boss} to ${r}`.execute(db);
}
