import { sql, type Kysely } from 'kysely';

// One row per attempt (run leg) of a task, written by the claim itself: which worker ran it, when, and the
// lease it took. The dashboard's timeline shows them; a takeover after a crash is a second row.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('task_attempts')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('worker_id', 'text', (c) => c.notNull())
    .addColumn('claimed_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('lease_expires_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('task_attempts_pkey', ['task_id', 'attempt'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('task_attempts').execute();
}
