import { sql, type Kysely } from 'kysely';

// A cancel request (tasks/cancel, the dashboard, expiry) NOTIFYs on a channel of its own, so that the
// worker running the task hears about it without hearing every other change (its own status messages
// included, which made it re-read its leases once per write).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create function mcp_notify_task_cancel() returns trigger language plpgsql as $$
    begin
      perform pg_notify('mcp_task_cancels', new.task_id);
      return null;
    end $$`.execute(db);
  await sql`
    create trigger tasks_notify_cancel after update on tasks
    for each row when (old.cancel_requested_at is null and new.cancel_requested_at is not null)
    execute function mcp_notify_task_cancel()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger tasks_notify_cancel on tasks`.execute(db);
  await sql`drop function mcp_notify_task_cancel()`.execute(db);
}
