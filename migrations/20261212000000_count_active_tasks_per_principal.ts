import { sql, type Kysely } from 'kysely';

// Each principal's active (non-terminal: working, input_required) top-level tasks, counted as they change
// instead of at every create (docs/security.md, "Quotas and fair share"): the quota and the rank read a
// handful of rows, however many tasks the principal holds. The count was a scan of the principal's active
// tasks at every create (up to the quota): at 4,000 held, most of a create's time.
// - A principal's count is spread over 32 rows (stripes), its sum. A change counts in the stripe of the
//   connection that makes it (its backend's pid), so a transaction changing many tasks of a principal (a
//   worker's batch of completions) holds one row of it, and concurrent transactions hold different rows:
//   stripes by task id made each batch lock most of the principal's rows in no order, and two batches
//   waited on each other until the deadlock timeout (a one-worker drain at half its rate, two at a tenth).
//   A stripe alone may go below zero; the sum is exact.
// - Triggers keep it in the transaction that changes a task (insert, a status change, delete), and only
//   when the task's part in it changes (the WHEN clauses: other updates call nothing); a TRUNCATE of the
//   tasks empties it.
// - Filled from the tasks already stored, under a lock that holds task writes until the migration commits
//   (about a second per million active tasks).
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('principal_active_tasks')
    .addColumn('principal', 'text', (c) => c.notNull())
    .addColumn('stripe', 'smallint', (c) => c.notNull())
    .addColumn('active', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('principal_active_tasks_pkey', ['principal', 'stripe'])
    .execute();
  await sql`create function count_active_task() returns trigger language plpgsql as $$
    begin
      if tg_op in ('UPDATE', 'DELETE') and old.parent_task_id is null
        and old.status in ('working', 'input_required') then
        insert into principal_active_tasks as c (principal, stripe, active)
        values (old.principal, pg_backend_pid() & 31, -1)
        on conflict (principal, stripe) do update set active = c.active - 1;
      end if;
      if tg_op in ('INSERT', 'UPDATE') and new.parent_task_id is null
        and new.status in ('working', 'input_required') then
        insert into principal_active_tasks as c (principal, stripe, active)
        values (new.principal, pg_backend_pid() & 31, 1)
        on conflict (principal, stripe) do update set active = c.active + 1;
      end if;
      return null;
    end $$`.execute(db);
  const active = (row: 'new' | 'old') =>
    sql.raw(`${row}.parent_task_id is null and ${row}.status in ('working', 'input_required')`);
  await sql`lock table tasks in share row exclusive mode`.execute(db);
  await sql`create trigger tasks_count_active_insert after insert on tasks
    for each row when (${active('new')}) execute function count_active_task()`.execute(db);
  await sql`create trigger tasks_count_active_update after update of status, principal, parent_task_id on tasks
    for each row when ((${active('old')}) is distinct from (${active('new')})
      or ((${active('new')}) and old.principal <> new.principal))
    execute function count_active_task()`.execute(db);
  await sql`create trigger tasks_count_active_delete after delete on tasks
    for each row when (${active('old')}) execute function count_active_task()`.execute(db);
  await sql`create function clear_active_task_counts() returns trigger language plpgsql as $$
    begin
      truncate principal_active_tasks;
      return null;
    end $$`.execute(db);
  await sql`create trigger tasks_count_active_truncate after truncate on tasks
    for each statement execute function clear_active_task_counts()`.execute(db);
  // The index the count scanned: nothing else reads it, and every create and completion wrote it.
  await sql`drop index tasks_principal_active_idx`.execute(db);
  await sql`insert into principal_active_tasks (principal, stripe, active)
    select principal, 0, count(*) from tasks
    where parent_task_id is null and status in ('working', 'input_required')
    group by 1`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`create index tasks_principal_active_idx on tasks (principal)
    where parent_task_id is null and status in ('working', 'input_required')`.execute(db);
  await sql`drop trigger tasks_count_active_truncate on tasks`.execute(db);
  await sql`drop function clear_active_task_counts()`.execute(db);
  await sql`drop trigger tasks_count_active_delete on tasks`.execute(db);
  await sql`drop trigger tasks_count_active_update on tasks`.execute(db);
  await sql`drop trigger tasks_count_active_insert on tasks`.execute(db);
  await sql`drop function count_active_task()`.execute(db);
  await db.schema.dropTable('principal_active_tasks').execute();
}
