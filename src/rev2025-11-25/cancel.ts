import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { TaskNotFoundError } from '../tasks/errors.ts';
import { taskExists } from '../tasks/store/read.ts';
import { ACTIVE_STATUSES } from '../tasks/status.ts';
import { TASK_VIEW_COLUMNS, toTaskView, type TaskView } from '../tasks/store/view.ts';

/**
 * tasks/cancel at 2025-11-25, which says the task is `cancelled` before the response: the flag for a
 * running attempt (it stops at its next check and can no longer write: the task is no longer
 * `working`) and the status in one guarded UPDATE. Undefined for a task already terminal; throws
 * TaskNotFoundError for an unknown (or another principal's) task. (2026-07-28's cancel is cooperative:
 * TaskService.cancel.)
 */
export async function cancelTaskNow(
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
