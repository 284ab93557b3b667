import type { Kysely } from 'kysely';
import { sql } from 'kysely';

// Schedules: a tool called on a clock (defineSchedule in a tools module, or `schedules add`).
// - `next_fire_at` is the schedule's cursor: the earliest tick not yet handled. A firing instance creates
//   the tick's task first (its idempotency key is derived from the schedule and the tick, so a second
//   instance, or a retry after a crash, finds that task instead of making another), then moves the cursor
//   with a guarded UPDATE (`where next_fire_at = <the one it read>`): one instance moves it, whatever
//   number fire at once, and a crash between the two leaves the tick to be fired again, idempotently.
// - `pending_tick_at`: overlap 'queue' keeps one tick waiting here while the last run is still active.
// - `run_requested_at`: `schedules run-now` asks the next pass of any instance to fire once, now.
// - `source`: 'module' rows are synced from the tools module at startup; 'cli' rows live only here.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('schedules')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('source', 'text', (c) => c.notNull().check(sql`source in ('module', 'cli')`))
    .addColumn('cron', 'text', (c) => c.notNull())
    .addColumn('timezone', 'text', (c) => c.notNull())
    .addColumn('tool_name', 'text', (c) => c.notNull())
    .addColumn('arguments', 'jsonb', (c) => c.notNull())
    .addColumn('principal', 'text', (c) => c.notNull())
    .addColumn('overlap', 'text', (c) => c.notNull().check(sql`overlap in ('skip', 'queue', 'allow')`))
    .addColumn('catch_up', 'jsonb', (c) => c.notNull())
    .addColumn('paused', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('next_fire_at', 'timestamptz', (c) => c.notNull())
    .addColumn('pending_tick_at', 'timestamptz')
    .addColumn('run_requested_at', 'timestamptz')
    .addColumn('last_tick_at', 'timestamptz')
    .addColumn('last_task_id', 'text')
    .addColumn('last_fired_at', 'timestamptz')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  // A firing pass reads the schedules with something to do.
  await sql`create index schedules_due_idx on schedules (next_fire_at) where not paused`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('schedules').execute();
}
