import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { TaskNotFoundError } from '../errors.ts';
import { ACTIVE_STATUSES } from '../status.ts';
import { taskExists } from './read.ts';
import { TASK_VIEW_COLUMNS, toTaskView, type TaskView } from './view.ts';

/**
 * Records a cancel request. A task no worker holds (waiting for input, or queued) becomes `cancelled`
 * at once; a running one keeps its status until its attempt sees the flag and stops. Finished tasks are
 * left as they are. Throws TaskNotFoundError for an unknown (or another principal's) task.
 */
export async function requestCancel(
  db: Kysely<Database>,
  taskId: string,
  principal: string,
): Promise<{ cancelledNow: boolean }> {
  const idle = sql<boolean>`(status = 'input_required' or leased_by is null)`;
  const row = await db
    .updateTable('tasks')
    .set({
      cancel_requested_at: sql`coalesce(cancel_requested_at, now())`,
      status: sql`case when ${idle} then 'cancelled' else status end`,
      status_message: sql`case when ${idle} then 'Cancelled by request' else status_message end`,
      last_updated_at: sql`case when ${idle} then now() else last_updated_at end`,
    })
    .where('task_id', '=', taskId)
    .where('principal', '=', principal)
    .where('status', 'in', ACTIVE_STATUSES)
    .returning('status')
    .executeTakeFirst();
  if (row !== undefined) return { cancelledNow: row.status === 'cancelled' };
  if (!(await taskExists(db, taskId, principal))) throw new TaskNotFoundError(taskId);
  return { cancelledNow: false };
}

/**
 * Cancels at once, as 2025-11-25 requires (`cancelled` before the response): the flag for a running
 * attempt (it stops at its next check and can no longer write: the task is no longer `working`) and
 * the status in the same UPDATE. Undefined for a task already terminal; throws TaskNotFoundError for
 * an unknown (or another principal's) task.
 */
export async function cancelNow(
  db: Kysely<Database>,
  taskId: string,
  principal: string,
): Promise<TaskView | undefined> {
  const row = await db
    .updateTable('tasks')
    .set({
      cancel_requested_at: sql`coalesce(cancel_requested_at, now())`,
      status: 'cancelled',
      status_message: 'Cancelled by request',
      last_updated_at: sql`now()`,
    })
    .where('task_id', '=', taskId)
    .where('principal', '=', principal)
    .where('status', 'in', ACTIVE_STATUSES)
    .returning(TASK_VIEW_COLUMNS)
    .executeTakeFirst();
  if (row !== undefined) return toTaskView(row);
  if (!(await taskExists(db, taskId, principal))) throw new TaskNotFoundError(taskId);
  return undefined;
}
