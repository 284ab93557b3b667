import type { Kysely } from 'kysely';
import { sql } from 'kysely';

// The operator's actions and what they need to see.
// - A task whose attempts ran out under a tool's `onExhausted: 'pause'` stays `working` with `paused_at`
//   set: released, no run queued, holding no slot, until an operator resumes it.
// - Each attempt records how it ended: its outcome and, for a crash, the exception's message and a stack
//   excerpt (for operators only: never sent to a client). An attempt whose handler still runs past its
//   cancel grace (CANCEL_GRACE_MS) is stuck: `stuck_since` says so until the handler returns, and its
//   worker renews `stuck_seen_at` meanwhile (a mark its worker stopped renewing is stale: that worker died).
// - task_actions is the audit trail of what operators (and clients' cancels) did to a task: who, when,
//   what, with details (a fork's source and first re-run step, a bulk resume's filter).
// - A tool may mark argument fields secret (`defineTool({ secretArguments })`): their paths are kept with
//   the task, so that every operator view (the dashboard, the CLI, whichever tools it has) redacts them.
// - A dashboard sign-in may carry the operator's name, so that its actions say who took them.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('tasks')
    .addColumn('paused_at', 'timestamptz')
    .addColumn('secret_arguments', sql`text[]`)
    .execute();
  await sql`create index tasks_paused_idx on tasks (paused_at) where paused_at is not null`.execute(db);
  await db.schema
    .alterTable('task_attempts')
    .addColumn('ended_at', 'timestamptz')
    .addColumn('outcome', 'text')
    .addColumn('error_message', 'text')
    .addColumn('error_stack', 'text')
    .addColumn('stuck_since', 'timestamptz')
    .addColumn('stuck_seen_at', 'timestamptz')
    .execute();
  await sql`create index task_attempts_stuck_idx on task_attempts (stuck_since) where stuck_since is not null`.execute(
    db,
  );
  await db.schema
    .createTable('task_actions')
    .addColumn('action_id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('detail', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .execute();
  await sql`create index task_actions_task_idx on task_actions (task_id, at)`.execute(db);
  await db.schema.alterTable('dashboard_sessions').addColumn('operator', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('dashboard_sessions').dropColumn('operator').execute();
  await db.schema.dropTable('task_actions').execute();
  await db.schema
    .alterTable('task_attempts')
    .dropColumn('ended_at')
    .dropColumn('outcome')
    .dropColumn('error_message')
    .dropColumn('error_stack')
    .dropColumn('stuck_since')
    .dropColumn('stuck_seen_at')
    .execute();
  await sql`drop index if exists tasks_paused_idx`.execute(db);
  await db.schema.alterTable('tasks').dropColumn('paused_at').dropColumn('secret_arguments').execute();
}
