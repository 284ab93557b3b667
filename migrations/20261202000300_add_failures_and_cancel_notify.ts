import { sql, type Kysely } from 'kysely';

// `failures` counts handler crashes (the retry budget), apart from `attempt`, which counts every claim
// (first run, resumes after input, hand-offs, reclaims). A cancel request now NOTIFYs too, so that the
// worker running the task hears about it at once.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('tasks')
    .addColumn('failures', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`drop trigger tasks_notify_update on tasks`.execute(db);
  await sql`
    create trigger tasks_notify_update after update on tasks
    for each row when (
      old.last_updated_at is distinct from new.last_updated_at
      or old.status is distinct from new.status
      or old.cancel_requested_at is distinct from new.cancel_requested_at
    )
    execute function mcp_notify_task_change()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger tasks_notify_update on tasks`.execute(db);
  await sql`
    create trigger tasks_notify_update after update on tasks
    for each row when (old.last_updated_at is distinct from new.last_updated_at or old.status is distinct from new.status)
    execute function mcp_notify_task_change()`.execute(db);
  await db.schema.alterTable('tasks').dropColumn('failures').execute();
}
