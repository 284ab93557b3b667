import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { ACTIVE_STATUSES, TERMINAL_STATUSES } from '../status.ts';

export const EXPIRED_ERROR = { code: -32603, message: 'Task has expired' } as const;

/**
 * Marks up to `limit` expired non-terminal tasks `failed` ("Task has expired"). Setting the cancel flag
 * too makes a running attempt stop. SKIP LOCKED lets several sweepers run at once.
 */
export async function expireTasks(db: Kysely<Database>, limit: number): Promise<string[]> {
  const rows = await db
    .updateTable('tasks')
    .set({
      status: 'failed',
      error: JSON.stringify(EXPIRED_ERROR),
      status_message: EXPIRED_ERROR.message,
      cancel_requested_at: sql`coalesce(cancel_requested_at, now())`,
      leased_by: null,
      lease_expires_at: null,
      last_updated_at: sql`now()`,
    })
    .where('task_id', 'in', (eb) =>
      eb
        .selectFrom('tasks')
        .select('task_id')
        .where('expires_at', '<=', sql<Date>`now()`)
        // (A map's items end with their parent: see the migration add_task_map_items.)
        .where('parent_task_id', 'is', null)
        .where('status', 'in', ACTIVE_STATUSES)
        .orderBy('expires_at')
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .where('status', 'in', ACTIVE_STATUSES)
    .returning('task_id')
    .execute();
  return rows.map((r) => r.task_id);
}

/** Deletes up to `limit` finished tasks whose TTL ran out more than `graceMs` ago (with their rows). */
export async function purgeTasks(db: Kysely<Database>, limit: number, graceMs: number): Promise<number> {
  const rows = await db
    .deleteFrom('tasks')
    .where('task_id', 'in', (eb) =>
      eb
        .selectFrom('tasks')
        .select('task_id')
        .where('expires_at', '<=', sql<Date>`now() - ${graceMs} * interval '1 millisecond'`)
        .where('parent_task_id', 'is', null)
        .where('status', 'in', TERMINAL_STATUSES)
        .orderBy('expires_at')
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .returning('task_id')
    .execute();
  return rows.length;
}

/** One cheap indexed probe: is there anything for a sweep to do? Keeps idle workers nearly silent. */
export async function sweepNeeded(db: Kysely<Database>, graceMs: number): Promise<boolean> {
  const row = await sql<{ needed: boolean }>`
    select exists (select 1 from tasks where status = 'working' and lease_expires_at < now())
        or exists (select 1 from tasks where expires_at <= now() and parent_task_id is null
                                          and status in ('working', 'input_required'))
        or exists (select 1 from tasks where expires_at <= now() - ${graceMs} * interval '1 millisecond'
                                          and parent_task_id is null and status in ('completed', 'failed', 'cancelled'))
       as needed`.execute(db);
  return row.rows[0]?.needed === true;
}
