import { sql, type Kysely } from 'kysely';

// What differs between protocol revisions is stored with the task when it is created, so that the core
// never asks which revision made it: `tool_error_fails` (at 2025-11-25 a tool result with isError ends
// the task failed), and `origin`, an opaque tag of where the task was made (a 2025-11-25 session id),
// which the core stores and shows but never interprets. It was `session_id`.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('tasks').renameColumn('session_id', 'origin').execute();
  await db.schema
    .alterTable('tasks')
    .addColumn('tool_error_fails', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute();
  await db.updateTable('tasks').set({ tool_error_fails: true }).where('origin', 'is not', null).execute();
  // tasks/list of one session (when requestors are not identified): an index range too.
  await db.schema
    .createIndex('tasks_origin_created_idx')
    .on('tasks')
    .columns(['origin', sql`created_at desc` as never, sql`task_id desc` as never])
    .where('origin', 'is not', null)
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('tasks_origin_created_idx').execute();
  await db.schema.alterTable('tasks').dropColumn('tool_error_fails').execute();
  await db.schema.alterTable('tasks').renameColumn('origin', 'session_id').execute();
}
