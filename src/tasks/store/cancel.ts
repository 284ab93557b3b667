import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { TaskNotFoundError } from '../errors.ts';
import { ACTIVE_STATUSES } from '../status.ts';
import { attemptEndColumns, stuckNow } from './attempt-ends.ts';
import { CANCELLED_COLUMNS } from './finish.ts';
import { taskExists } from './read.ts';

/**
 * Records a cancel request. A task no worker holds (waiting for input, or queued) becomes `cancelled`
 * at once; a running one keeps its status until its attempt sees the flag and stops. Finished tasks are
 * left as they are (`requested` false: the request changed nothing). Throws TaskNotFoundError for an
 * unknown (or another principal's) task. `spawnedBy`: a child task's parent (cancelled now, it is to
 * be woken: store/children.ts wakeSpawner).
 */
export async function requestCancel(
  db: Kysely<Database>,
  taskId: string,
  principal: string,
): Promise<{ requested: boolean; cancelledNow: boolean; spawnedBy?: string | undefined }> {
  const idle = sql<boolean>`(status = 'input_required' or leased_by is null)`;
  const row = await db
    .updateTable('tasks')
    .set({
      cancel_requested_at: sql`coalesce(cancel_requested_at, now())`,
      status: sql`case when ${idle} then 'cancelled' else status end`,
      // (A paused task is idle: a cancel ends it, and it is paused no more.)
      paused_at: sql`case when ${idle} then null else paused_at end`,
      status_message: sql`case when ${idle} then 'Cancelled by request' else status_message end`,
      last_updated_at: sql`case when ${idle} then now() else last_updated_at end`,
    })
    .where('task_id', '=', taskId)
    .where('principal', '=', principal)
    .where('status', 'in', ACTIVE_STATUSES)
    .returning(['status', 'spawned_by'])
    .executeTakeFirst();
  if (row !== undefined) {
    const cancelledNow = row.status === 'cancelled';
    return { requested: true, cancelledNow, ...(row.spawned_by !== null && { spawnedBy: row.spawned_by }) };
  }
  if (!(await taskExists(db, taskId, principal))) throw new TaskNotFoundError(taskId);
  return { requested: false, cancelledNow: false };
}

/**
 * Ends a running attempt whose handler did not stop within the cancel grace (CANCEL_GRACE_MS): one
 * transaction, fenced by attempt, from `working`, only where a cancel was asked for. The handler may still
 * be running: its attempt's row records the end and marks the leg stuck, and whatever the handler writes
 * later is turned away by the same fence. Undefined when the fence did not hold (the attempt settled
 * first, or lost the task); else the task's tool, for the metrics.
 */
export async function cancelAfterGrace(
  db: Kysely<Database>,
  taskId: string,
  attempt: number,
  graceMs: number,
): Promise<{ toolName: string } | undefined> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable('tasks')
      .set(CANCELLED_COLUMNS)
      .where('task_id', '=', taskId)
      .where('attempt', '=', attempt)
      .where('status', '=', 'working')
      .where('cancel_requested_at', 'is not', null)
      .returning('tool_name')
      .executeTakeFirst();
    if (row === undefined) return undefined;
    const message = `the handler had not returned ${graceMs} ms after its cancel signal: the task ended without it`;
    await trx
      .updateTable('task_attempts')
      .set({ ...attemptEndColumns({ outcome: 'cancelled', error: { message } }), ...stuckNow })
      .where('task_id', '=', taskId)
      .where('attempt', '=', attempt)
      .execute();
    return { toolName: row.tool_name };
  });
}
