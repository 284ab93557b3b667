import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { TaskNotFoundError } from '../errors.ts';
import { ACTIVE_STATUSES } from '../status.ts';
import { taskExists } from './read.ts';

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
