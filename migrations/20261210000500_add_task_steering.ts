import type { Kysely } from 'kysely';
import { sql } from 'kysely';

// Steering and the owner's pause (SEP-2669 draft, experimental).
// - task_steering holds the messages a task's requestor sent with `tasks/steer`, numbered from 1 per task
//   in the order they were sent (`tasks.steering_sent` counts them: the guarded UPDATE that bumps it
//   hands out the number, and bounds how many one task may get). The handler reads them as steps, so the
//   rows are only what was sent; what was read is in the task's steps. They go with their task.
// - `tasks.pause_requested_at`: the owner asked for a pause (`tasks/pause`) while an attempt held the
//   task; the attempt pauses at its next checkpoint. It NOTIFYs as a cancel request does (the cancel
//   requests' channel and function), which the worker running the task listens to: its lease check
//   reads pause requests too.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('task_steering')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('message', 'text', (c) => c.notNull())
    .addColumn('sent_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('task_steering_pk', ['task_id', 'seq'])
    .execute();
  await db.schema
    .alterTable('tasks')
    .addColumn('steering_sent', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('pause_requested_at', 'timestamptz')
    .execute();
  await sql`
    create trigger tasks_notify_pause after update on tasks
    for each row when (old.pause_requested_at is null and new.pause_requested_at is not null)
    execute function mcp_notify_task_cancel()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger tasks_notify_pause on tasks`.execute(db);
  await db.schema.alterTable('tasks').dropColumn('steering_sent').dropColumn('pause_requested_at').execute();
  await db.schema.dropTable('task_steering').execute();
}
