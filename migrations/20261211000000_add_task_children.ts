import { sql, type Kysely } from 'kysely';

// Child tasks (ctx.callTool, ctx.spawn): a task a parent's handler started is an ordinary top-level task
// of the same principal (listed, broadcast, expired and purged like any; parent_task_id stays for map
// items), which names the task that spawned it and the name it was spawned under. The unique index makes
// the creation idempotent: a parent's attempt that died between creating a child and checkpointing it
// finds the same child again, never a second one. spawn_depth bounds chains (MAX_CHILD_DEPTH). When a
// task ends (any way), its children not started detached are cancelled by a trigger, the one place every
// path goes through: one no worker holds is cancelled at once, a running one is told by its cancel flag
// (the cancel path of tasks/cancel), and their own children follow by the same trigger.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('tasks')
    .addColumn('spawned_by', 'text', (c) => c.references('tasks.task_id').onDelete('set null'))
    .addColumn('spawn_name', 'text')
    .addColumn('spawn_depth', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('spawn_detached', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute();
  await db.schema
    .createIndex('tasks_spawned_idx')
    .on('tasks')
    .columns(['spawned_by', 'spawn_name'])
    .unique()
    .where(sql.ref('spawned_by'), 'is not', null)
    .execute();
  await sql`
    create function mcp_cancel_spawned_children() returns trigger language plpgsql as $$
    begin
      update tasks set
        cancel_requested_at = coalesce(cancel_requested_at, now()),
        status = case when status = 'input_required' or leased_by is null then 'cancelled' else status end,
        paused_at = case when status = 'input_required' or leased_by is null then null else paused_at end,
        status_message = case when status = 'input_required' or leased_by is null then 'Cancelled by request'
          else status_message end,
        last_updated_at = now()
      where spawned_by = new.task_id and not spawn_detached and status in ('working', 'input_required');
      return null;
    end $$`.execute(db);
  await sql`
    create trigger tasks_cancel_spawned_children after update of status on tasks
    for each row when (new.parent_task_id is null and old.status in ('working', 'input_required')
                       and new.status in ('completed', 'failed', 'cancelled'))
    execute function mcp_cancel_spawned_children()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger tasks_cancel_spawned_children on tasks`.execute(db);
  await sql`drop function mcp_cancel_spawned_children()`.execute(db);
  await db.schema.dropIndex('tasks_spawned_idx').execute();
  await db.schema
    .alterTable('tasks')
    .dropColumn('spawn_detached')
    .dropColumn('spawn_depth')
    .dropColumn('spawn_name')
    .dropColumn('spawned_by')
    .execute();
}
