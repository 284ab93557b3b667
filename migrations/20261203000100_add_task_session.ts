import { sql, type Kysely } from 'kysely';

// A task created through a 2025-11-25 session records it: in that revision a tool result with
// `isError` ends the task `failed`. And `tasks/list` pages a principal's tasks, newest first.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('tasks').addColumn('session_id', 'text').execute();
  await db.schema
    .createIndex('tasks_principal_created_idx')
    .on('tasks')
    .columns(['principal', sql`created_at desc` as never, sql`task_id desc` as never])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('tasks_principal_created_idx').execute();
  await db.schema.alterTable('tasks').dropColumn('session_id').execute();
}
