import { sql, type Kysely } from 'kysely';

// Signals: a task waits for something outside its client (a webhook, a third party's approval). The
// handler creates a signal once (ctx.createSignal) and gets a token; whoever holds the token delivers
// the signal once (POST /signals/{token}), before or while the task waits. Only the token's SHA-256 is
// stored here. A signal goes with its task.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('task_signals')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('timeout_at', 'timestamptz')
    .addColumn('delivered_at', 'timestamptz')
    .addColumn('payload', 'jsonb')
    .addPrimaryKeyConstraint('task_signals_pk', ['task_id', 'name'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('task_signals').execute();
}
