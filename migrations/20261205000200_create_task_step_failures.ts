import type { Kysely } from 'kysely';
import { sql } from 'kysely';

// Each step's failed attempts: how many, and the last error's message (for the operator: `tasks show` and
// the dashboard; a step's retry policy counts from here across legs). Goes with its task.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('task_step_failures')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull())
    .addColumn('last_error', 'text', (c) => c.notNull())
    .addColumn('last_failed_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('task_step_failures_pk', ['task_id', 'name'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('task_step_failures').execute();
}
