// The operator's changes to any principal's tasks: cancel through the same store path as tasks/cancel, and
// purge of finished tasks. For the operator CLI (and the dashboard), never for MCP clients: nothing here is
// scoped by principal. The operator's reads: admin-list.ts (the task list), admin-task.ts (one task and its
// history), admin-activity.ts (the dashboard's curves); resume: pause.ts; fork: fork.ts.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { TaskNotFoundError } from '../errors.ts';
import { ACTIVE_STATUSES, TERMINAL_STATUSES } from '../status.ts';
import { isWellFormedTaskId } from '../ids.ts';
import { recordAction, type Actor } from './actions.ts';
import { requestCancel } from './cancel.ts';

/**
 * Cancels as the task's owner would with tasks/cancel (the same store function, in a transaction):
 * at once when no worker holds it, otherwise the running handler sees the flag. Returns the status after.
 */
export async function adminCancelTask(
  db: Kysely<Database>,
  taskId: string,
  actor: Actor,
): Promise<{ status: string; cancelledNow: boolean }> {
  if (!isWellFormedTaskId(taskId)) throw new TaskNotFoundError(taskId.slice(0, 64));
  return db.transaction().execute(async (trx) => {
    const owner = await trx
      .selectFrom('tasks')
      .select('principal')
      .where('task_id', '=', taskId)
      .executeTakeFirst();
    if (owner === undefined) throw new TaskNotFoundError(taskId);
    const { requested, cancelledNow } = await requestCancel(trx, taskId, owner.principal);
    // (A finished task's cancel changes nothing: nothing to audit.)
    if (requested) await recordAction(trx, [taskId], actor, 'cancel');
    const after = await trx
      .selectFrom('tasks')
      .select('status')
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
    return { status: after.status, cancelledNow };
  });
}

/**
 * Deletes finished tasks (completed, failed, cancelled) last updated at least `olderThanMs` ago, with their
 * steps and input requests. Active tasks are never touched. `dryRun` counts instead.
 */
export async function adminPurgeTasks(
  db: Kysely<Database>,
  {
    olderThanMs,
    status,
    dryRun = false,
  }: { olderThanMs: number; status?: readonly string[]; dryRun?: boolean },
): Promise<number> {
  const statuses = (status ?? TERMINAL_STATUSES).filter((s) =>
    (TERMINAL_STATUSES as readonly string[]).includes(s),
  );
  if (statuses.length === 0) return 0;
  const cutoff = sql<Date>`now() - ${olderThanMs} * interval '1 millisecond'`;
  if (dryRun) {
    const row = await db
      .selectFrom('tasks')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('status', 'in', statuses)
      .where('last_updated_at', '<=', cutoff)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }
  const deleted = await db
    .deleteFrom('tasks')
    .where('status', 'in', statuses)
    .where('status', 'not in', ACTIVE_STATUSES)
    .where('last_updated_at', '<=', cutoff)
    .executeTakeFirst();
  return Number(deleted.numDeletedRows);
}
