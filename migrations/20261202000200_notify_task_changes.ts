import { sql, type Kysely } from 'kysely';

// Every visible change of a task (insert, status, statusMessage, answered input…) NOTIFYs its id in the
// same transaction, so listeners on any instance hear about changes made by any process. Lease renewals
// and claims do not touch last_updated_at or status, so they stay quiet.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create function mcp_notify_task_change() returns trigger language plpgsql as $$
    begin
      perform pg_notify('mcp_task_changes', new.task_id);
      return null;
    end $$`.execute(db);
  await sql`
    create trigger tasks_notify_insert after insert on tasks
    for each row execute function mcp_notify_task_change()`.execute(db);
  await sql`
    create trigger tasks_notify_update after update on tasks
    for each row when (old.last_updated_at is distinct from new.last_updated_at or old.status is distinct from new.status)
    execute function mcp_notify_task_change()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger tasks_notify_update on tasks`.execute(db);
  await sql`drop trigger tasks_notify_insert on tasks`.execute(db);
  await sql`drop function mcp_notify_task_change()`.execute(db);
}
