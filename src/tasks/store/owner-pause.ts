// The owner's pause (`tasks/pause`, SEP-2669 draft): the operator pause of pause.ts, asked for by the
// task's own principal. A task no attempt holds (queued, asleep, waiting for a signal or for steering)
// pauses at once; a running one gets a pause request, which its attempt honours at its next checkpoint
// (a new step, or the end of its leg: see settlePauseRequest). `tasks/resume` is pause.ts's resumeTasks;
// on a pause still requested, it withdraws the request.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { recordAction, type Actor } from './actions.ts';

/** The status message of a task its owner paused. */
export const PAUSED_BY_OWNER = 'Paused by its owner: tasks/resume runs it again';

/** The status message of a running task whose owner asked for a pause. */
export const PAUSE_REQUESTED = 'Pausing at its next checkpoint (its owner asked)';

/** No attempt holds the task (none, or one whose lease lapsed: the sweeper takes it back). */
const IDLE = sql<boolean>`(leased_by is null or lease_expires_at < now())`;

/**
 * Pauses the principal's `working` task, or asks its running attempt to, and records the action (in the
 * caller's transaction). Undefined when nothing changed: not the principal's task, not `working`,
 * already paused or a pause already asked for, a cancel asked for, or a map item (see whyNotPaused).
 */
export async function requestOwnerPause(
  db: Kysely<Database>,
  taskId: string,
  principal: string,
  actor: Actor,
): Promise<'paused' | 'requested' | undefined> {
  const row = await db
    .updateTable('tasks')
    .set({
      paused_at: sql`case when ${IDLE} then now() else null end`,
      pause_requested_at: sql`case when ${IDLE} then null else now() end`,
      status_message: sql`case when ${IDLE} then ${PAUSED_BY_OWNER} else ${PAUSE_REQUESTED} end`,
      last_updated_at: sql`now()`,
    })
    .where('task_id', '=', taskId)
    .where('principal', '=', principal)
    .where('status', '=', 'working')
    .where('paused_at', 'is', null)
    .where('pause_requested_at', 'is', null)
    .where('cancel_requested_at', 'is', null)
    .where('parent_task_id', 'is', null)
    .returning(sql<boolean>`paused_at is not null`.as('paused'))
    .executeTakeFirst();
  if (row === undefined) return undefined;
  const outcome = row.paused ? 'paused' : 'requested';
  await recordAction(db, [taskId], actor, 'pause', outcome === 'requested' ? { at: 'next checkpoint' } : {});
  return outcome;
}

/**
 * Why requestOwnerPause changed nothing, for a task its principal can see: undefined when that is no
 * refusal (waiting for input: it cannot pause at this point, SEP-2669 says to answer the task as it is;
 * a pause already asked for), else what the client is told.
 */
export async function whyNotPaused(db: Kysely<Database>, taskId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('tasks')
    .select(['status', 'paused_at', 'pause_requested_at', 'cancel_requested_at'])
    .where('task_id', '=', taskId)
    .executeTakeFirst();
  if (row === undefined) return 'the task no longer exists';
  if (row.status === 'input_required') return undefined;
  if (row.status !== 'working') return `the task has ended (${row.status}): only a working task pauses`;
  if (row.paused_at !== null) return 'the task is already paused';
  if (row.cancel_requested_at !== null) return 'the task is being cancelled';
  return row.pause_requested_at !== null ? undefined : 'the task cannot be paused';
}

/**
 * Turns a pause request into the pause, once no attempt holds the task (in the transaction that
 * released it: the caller queues no run then). True when it paused the task.
 */
export async function settlePauseRequest(db: Kysely<Database>, taskId: string): Promise<boolean> {
  const row = await db
    .updateTable('tasks')
    .set({
      paused_at: sql`now()`,
      pause_requested_at: null,
      status_message: PAUSED_BY_OWNER,
      last_updated_at: sql`now()`,
    })
    .where('task_id', '=', taskId)
    .where('status', '=', 'working')
    .where('pause_requested_at', 'is not', null)
    .where('paused_at', 'is', null)
    .where(IDLE)
    .returning('task_id')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * `tasks/resume` on a task whose pause was asked for but has not happened yet: the request is
 * withdrawn and the task runs on. True when there was one (the action is recorded).
 */
export async function withdrawPauseRequest(
  db: Kysely<Database>,
  taskId: string,
  principal: string,
  actor: Actor,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable('tasks')
      .set({ pause_requested_at: null, status_message: `Resumed by ${actor}`, last_updated_at: sql`now()` })
      .where('task_id', '=', taskId)
      .where('principal', '=', principal)
      .where('status', '=', 'working')
      .where('pause_requested_at', 'is not', null)
      .where('paused_at', 'is', null)
      .returning('task_id')
      .executeTakeFirst();
    if (row === undefined) return false;
    await recordAction(trx, [taskId], actor, 'resume', { withdrew: 'pause request' });
    return true;
  });
}
