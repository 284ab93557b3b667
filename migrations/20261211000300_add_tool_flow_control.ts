import { sql, type Kysely } from 'kysely';

// Flow control per tool (see docs/tools.md, "Flow control"), stored with each task at creation:
// - rateLimit: at most `rate_limit` first legs per `rate_per_ms` per `rate_key`, cluster-wide. The claim of
//   a first leg counts the key's starts in `task_rate_starts` (a sliding log, pruned as it is read) under
//   the key's advisory lock; a task over the limit waits, unleased, for a start in the window to hand it
//   its place (`successor_task_id`) one window later.
// - debounce: a call whose `debounce_key` matches a task of the same principal that has not started yet
//   replaces its arguments and pushes its `run_after` on; a claim never starts a task before `run_after`.
// - timeoutMs: `deadline_at` (creation + `timeout_ms`) bounds the whole task, across legs; the sweeper
//   fails tasks past it, and a claim never starts one.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('tasks')
    .addColumn('rate_key', 'text')
    .addColumn('rate_limit', 'integer')
    .addColumn('rate_per_ms', 'integer')
    .addColumn('debounce_key', 'text')
    .addColumn('run_after', 'timestamptz')
    .addColumn('timeout_ms', 'bigint')
    .addColumn('deadline_at', 'timestamptz')
    .execute();
  await db.schema
    .createTable('task_rate_starts')
    .addColumn('rate_key', 'text', (c) => c.notNull())
    .addColumn('started_at', 'timestamptz', (c) => c.notNull())
    .addColumn('task_id', 'text', (c) => c.notNull())
    .addColumn('successor_task_id', 'text')
    .execute();
  await sql`create index task_rate_starts_key_idx on task_rate_starts (rate_key, started_at)`.execute(db);
  await sql`create index tasks_rate_waiting_idx on tasks (rate_key, created_at)
    where rate_key is not null and status = 'working' and leased_by is null`.execute(db);
  await sql`create index tasks_debounce_pending_idx on tasks (principal, debounce_key)
    where debounce_key is not null and status = 'working' and attempt = 0`.execute(db);
  await sql`create index tasks_deadline_idx on tasks (deadline_at)
    where deadline_at is not null and status in ('working', 'input_required')`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index tasks_deadline_idx`.execute(db);
  await sql`drop index tasks_debounce_pending_idx`.execute(db);
  await sql`drop index tasks_rate_waiting_idx`.execute(db);
  await db.schema.dropTable('task_rate_starts').execute();
  await db.schema
    .alterTable('tasks')
    .dropColumn('rate_key')
    .dropColumn('rate_limit')
    .dropColumn('rate_per_ms')
    .dropColumn('debounce_key')
    .dropColumn('run_after')
    .dropColumn('timeout_ms')
    .dropColumn('deadline_at')
    .execute();
}
