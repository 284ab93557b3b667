import { sql, type Kysely } from 'kysely';

// Every attempt of a finished task ends. The paths that finish a task end its attempt in the same
// statement with what they know (a worker's finish with its crash, a map item's completion with its
// outcome even when it landed after its lease lapsed), and a takeover ends the attempt it replaces; a task
// can also end with no worker to say so: the sweeper expires it, a cancel or its map parent's end
// settles it after its worker died. This trigger, on the one write every path goes through, ends the
// attempts such a change leaves open: one whose lease had lapsed (its worker died) `lease_lost` at the
// time it lapsed; one still leased (a live worker, told to stop) with the task's new status, now. An
// older attempt still open was taken over: `lease_lost`, at the latest when the next attempt claimed.
// Attempts left open before this migration are ended the same way, once.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create function mcp_end_attempts_of_finished_task() returns trigger language plpgsql as $$
    declare
      lapsed boolean := old.leased_by is not null and old.lease_expires_at < now();
    begin
      update task_attempts a set
        outcome = case when a.attempt < new.attempt or lapsed then 'lease_lost' else new.status end,
        ended_at = case
          when a.attempt < new.attempt then coalesce(
            (select n.claimed_at from task_attempts n where n.task_id = a.task_id and n.attempt = a.attempt + 1),
            now())
          when lapsed then old.lease_expires_at
          else now() end
      where a.task_id = new.task_id and a.ended_at is null;
      return null;
    end $$`.execute(db);
  // (Only the transitions into a terminal status: a statement that finishes many tasks pays one index
  // probe per task, and finds nothing to do where its own statement ended the attempt.)
  await sql`
    create trigger tasks_end_attempts after update of status on tasks
    for each row when (old.status in ('working', 'input_required')
                       and new.status in ('completed', 'failed', 'cancelled'))
    execute function mcp_end_attempts_of_finished_task()`.execute(db);
  await sql`
    update task_attempts a set
      outcome = case when a.attempt < t.attempt then 'lease_lost' else t.status end,
      ended_at = case when a.attempt < t.attempt then coalesce(
          (select n.claimed_at from task_attempts n where n.task_id = a.task_id and n.attempt = a.attempt + 1),
          t.last_updated_at)
        else t.last_updated_at end
    from tasks t
    where t.task_id = a.task_id and a.ended_at is null and t.status in ('completed', 'failed', 'cancelled')`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger tasks_end_attempts on tasks`.execute(db);
  await sql`drop function mcp_end_attempts_of_finished_task()`.execute(db);
}
