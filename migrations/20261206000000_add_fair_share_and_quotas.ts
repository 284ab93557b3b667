import { sql, type Kysely } from 'kysely';

// Fair share and quotas (see docs/security.md, "Quotas and fair share").
// - A principal's active (non-terminal) top-level tasks are counted at every create: the quota on them,
//   and the rank that orders the principal's runs in the queue behind those of lighter principals.
// - A tool may cap how many of its legs run at once per key (`defineTool({ concurrency })`): the key and
//   the limit are stored with the task at creation; claims count the running legs that share the key.
// - Task creations per principal are metered by a token bucket, one row per principal.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index tasks_principal_active_idx on tasks (principal)
    where parent_task_id is null and status in ('working', 'input_required')`.execute(db);
  await db.schema
    .alterTable('tasks')
    .addColumn('concurrency_key', 'text')
    .addColumn('concurrency_limit', 'integer')
    .execute();
  await sql`create index tasks_concurrency_running_idx on tasks (concurrency_key)
    where concurrency_key is not null and leased_by is not null`.execute(db);
  await sql`create index tasks_concurrency_waiting_idx on tasks (concurrency_key, created_at)
    where concurrency_key is not null and status = 'working' and leased_by is null`.execute(db);
  await db.schema
    .createTable('principal_creation_buckets')
    .addColumn('principal', 'text', (c) => c.primaryKey())
    .addColumn('tokens', 'double precision', (c) => c.notNull())
    .addColumn('refilled_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('principal_creation_buckets').execute();
  await sql`drop index tasks_concurrency_waiting_idx`.execute(db);
  await sql`drop index tasks_concurrency_running_idx`.execute(db);
  await db.schema.alterTable('tasks').dropColumn('concurrency_key').dropColumn('concurrency_limit').execute();
  await sql`drop index tasks_principal_active_idx`.execute(db);
}
