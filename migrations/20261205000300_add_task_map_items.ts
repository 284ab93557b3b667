import { sql, type Kysely } from 'kysely';

// Fan-out (ctx.map): each item of a map is a child task of the task whose handler called it, in the
// same table so that it is claimed, leased, retried, reclaimed and expired like any task. A child
// names its parent, its map and its index; it is never listed, and its changes are not broadcast
// (a parent's progress is). A child not yet dispatched is `working` with no claim deadline
// (lease_expires_at null): the pending index finds the next one in order. When a parent ends (any
// way: completed, failed, cancelled in either era, expired), its unfinished items are cancelled by a
// trigger, the one place every path goes through. So items need no expiry or purge of their own (a
// purged parent takes its items with it), and are never looked up by principal: the indexes for those
// hold top-level tasks only (rebuilt here; each item written then costs two index entries less).
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('tasks')
    .addColumn('parent_task_id', 'text', (c) => c.references('tasks.task_id').onDelete('cascade'))
    .addColumn('map_name', 'text')
    .addColumn('map_index', 'integer')
    .execute();
  await db.schema
    .createIndex('tasks_map_items_idx')
    .on('tasks')
    .columns(['parent_task_id', 'map_name', 'map_index'])
    .unique()
    .where(sql.ref('parent_task_id'), 'is not', null)
    .execute();
  await db.schema
    .createIndex('tasks_map_items_pending_idx')
    .on('tasks')
    .columns(['parent_task_id', 'map_name', 'map_index'])
    .where(sql<boolean>`parent_task_id is not null and status = 'working' and lease_expires_at is null`)
    .execute();
  await sql`drop index tasks_principal_created_idx`.execute(db);
  await sql`create index tasks_principal_created_idx on tasks (principal, created_at desc, task_id desc)
    where parent_task_id is null`.execute(db);
  await sql`drop index tasks_expires_at_idx`.execute(db);
  await sql`create index tasks_expires_at_idx on tasks (expires_at)
    where expires_at is not null and parent_task_id is null`.execute(db);
  // Children are not broadcast to listeners (a map of 10,000 items would be 10,000 notifications);
  // their cancel requests still are, so that the worker running one stops at once.
  await sql`drop trigger tasks_notify_insert on tasks`.execute(db);
  await sql`drop trigger tasks_notify_update on tasks`.execute(db);
  await sql`
    create trigger tasks_notify_insert after insert on tasks
    for each row when (new.parent_task_id is null) execute function mcp_notify_task_change()`.execute(db);
  await sql`
    create trigger tasks_notify_update after update on tasks
    for each row when (new.parent_task_id is null and (
      old.last_updated_at is distinct from new.last_updated_at
      or old.status is distinct from new.status
      or old.cancel_requested_at is distinct from new.cancel_requested_at
    ))
    execute function mcp_notify_task_change()`.execute(db);
  await sql`
    create function mcp_cancel_map_items() returns trigger language plpgsql as $$
    begin
      update tasks set
        cancel_requested_at = coalesce(cancel_requested_at, now()),
        status = case when leased_by is null or lease_expires_at < now() then 'cancelled' else status end,
        status_message = case when leased_by is null or lease_expires_at < now() then 'Cancelled by request'
          else status_message end,
        lease_expires_at = case when leased_by is null or lease_expires_at < now() then null
          else lease_expires_at end,
        leased_by = case when lease_expires_at < now() then null else leased_by end,
        last_updated_at = now()
      where parent_task_id = new.task_id and status in ('working', 'input_required');
      return null;
    end $$`.execute(db);
  await sql`
    create trigger tasks_cancel_map_items after update of status on tasks
    for each row when (new.parent_task_id is null and old.status in ('working', 'input_required')
                       and new.status in ('completed', 'failed', 'cancelled'))
    execute function mcp_cancel_map_items()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger tasks_cancel_map_items on tasks`.execute(db);
  await sql`drop function mcp_cancel_map_items()`.execute(db);
  await sql`drop trigger tasks_notify_insert on tasks`.execute(db);
  await sql`drop trigger tasks_notify_update on tasks`.execute(db);
  await sql`
    create trigger tasks_notify_insert after insert on tasks
    for each row execute function mcp_notify_task_change()`.execute(db);
  await sql`
    create trigger tasks_notify_update after update on tasks
    for each row when (
      old.last_updated_at is distinct from new.last_updated_at
      or old.status is distinct from new.status
      or old.cancel_requested_at is distinct from new.cancel_requested_at
    )
    execute function mcp_notify_task_change()`.execute(db);
  await sql`drop index tasks_expires_at_idx`.execute(db);
  await sql`create index tasks_expires_at_idx on tasks (expires_at) where expires_at is not null`.execute(db);
  await sql`drop index tasks_principal_created_idx`.execute(db);
  await sql`create index tasks_principal_created_idx on tasks (principal, created_at desc, task_id desc)`.execute(
    db,
  );
  await db.schema.dropIndex('tasks_map_items_pending_idx').execute();
  await db.schema.dropIndex('tasks_map_items_idx').execute();
  await db.schema
    .alterTable('tasks')
    .dropColumn('map_index')
    .dropColumn('map_name')
    .dropColumn('parent_task_id')
    .execute();
}
