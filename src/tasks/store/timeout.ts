// A tool's timeoutMs (`defineTool({ timeoutMs })`): a deadline for the whole task, stored at creation
// (`deadline_at`), across every leg. The sweeper fails the tasks past it (failTimedOutTasks), a claim never
// starts one (lease.ts: claimCtes), and a delivery refused for it fails its task at once
// (failIfTimedOut). Failing sets the cancel flag too, so a running leg's lease keeper aborts it.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { ACTIVE_STATUSES } from '../status.ts';

/** The error of a task past its timeoutMs, naming the setting (built in SQL from the stored timeout_ms). */
const TIMED_OUT_ERROR = sql`jsonb_build_object('code', -32603, 'message',
  'Task timed out after timeoutMs=' || timeout_ms || ' (the tool''s timeoutMs)')`;

const TIMED_OUT_MESSAGE = sql<string>`'Task timed out after timeoutMs=' || timeout_ms || ' (the tool''s timeoutMs)'`;

/** The guarded transition of a task past its deadline to `failed`, for the tasks `ids` selects. */
function timedOutUpdate(db: Kysely<Database>) {
  return db
    .updateTable('tasks')
    .set({
      status: 'failed',
      error: TIMED_OUT_ERROR as never,
      status_message: TIMED_OUT_MESSAGE,
      paused_at: null,
      cancel_requested_at: sql`coalesce(cancel_requested_at, now())`,
      leased_by: null,
      lease_expires_at: null,
      last_updated_at: sql`now()`,
    })
    .where('deadline_at', '<=', sql<Date>`now()`)
    .where('status', 'in', ACTIVE_STATUSES);
}

/**
 * Fails up to `limit` tasks past their timeoutMs ("Task timed out after timeoutMs=…"). SKIP LOCKED lets
 * several sweepers run at once.
 */
export async function failTimedOutTasks(db: Kysely<Database>, limit: number): Promise<string[]> {
  const rows = await timedOutUpdate(db)
    .where('task_id', 'in', (eb) =>
      eb
        .selectFrom('tasks')
        .select('task_id')
        .where('deadline_at', '<=', sql<Date>`now()`)
        .where('status', 'in', ACTIVE_STATUSES)
        .orderBy('deadline_at')
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .returning('task_id')
    .execute();
  return rows.map((r) => r.task_id);
}

/** Fails the task if it is past its timeoutMs (a leg about to start); whether it did. */
export async function failIfTimedOut(db: Kysely<Database>, taskId: string): Promise<boolean> {
  const row = await timedOutUpdate(db).where('task_id', '=', taskId).returning('task_id').executeTakeFirst();
  return row !== undefined;
}

/** A cheap probe for the sweeper: is any task past its timeoutMs? */
export const TIMED_OUT_EXISTS = sql<boolean>`exists (select 1 from tasks where deadline_at <= now()
  and status in ('working', 'input_required'))`;
