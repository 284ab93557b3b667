import type { Kysely } from 'kysely';
import { sql } from 'kysely';

// How many times each step with a retry policy has started its body, counted before the body runs: a
// worker killed mid-step has used an attempt, so `maxAttempts` bounds the body's starts whatever crashes
// (task_step_failures counts only the failures a worker lived to record). Goes with its task.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('task_step_starts')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('starts', 'integer', (c) => c.notNull())
    .addColumn('last_started_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('task_step_starts_pk', ['task_id', 'name'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('task_step_starts').execute();
}
