import type { Kysely } from 'kysely';
import { sql } from 'kysely';

// A task's events (ctx.emit, SEP-2694's task event streams): numbered 1, 2, 3… per task with no gaps,
// written only by the attempt that holds the task. `tasks.event_seq` is the last number given and
// `event_bytes` the payload bytes so far (the per-task bounds); the attempt's append bumps them in the
// same statement, which takes the task's row lock, so two appends never take the same numbers. `key`
// says where in the handler's run the event was emitted: a leg that runs again after a crash skips the
// events already written under their keys. Goes with its task.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('tasks')
    .addColumn('event_seq', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('event_bytes', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createTable('task_events')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('payload', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('task_events_pk', ['task_id', 'seq'])
    .execute();
  // The optional shorter retention (TASK_EVENT_RETENTION_MS) deletes the oldest events first.
  await db.schema.createIndex('task_events_created_at').on('task_events').column('created_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('task_events').execute();
  await db.schema.alterTable('tasks').dropColumn('event_seq').dropColumn('event_bytes').execute();
}
