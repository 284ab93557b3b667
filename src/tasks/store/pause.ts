// Paused tasks: attempts ran out under a tool's `onExhausted: 'pause'`. A paused task stays `working`
// (a terminal status never changes, so this is the only way an operator can still act on it), released,
// with no run queued and no slot held, until an operator resumes it: then its attempts count afresh and
// it runs again from its last completed step. A cancel ends a paused task at once (no attempt holds it).
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { TaskQueue } from '../../queue/task-queue.ts';
import { attemptEndColumns, type AttemptEnd } from './attempt-ends.ts';
import { recordAction, type Actor } from './actions.ts';
import { settleCancelRequest } from './finish.ts';
import { claimDeadline } from './lease.ts';

/**
 * Pauses the task this attempt holds, and records the attempt's end, in one statement (fenced like
 * every write of an attempt); a cancel asked for meanwhile ends it `cancelled` instead. False when the
 * fence did not hold.
 */
export async function pauseAttempt(
  db: Kysely<Database>,
  taskId: string,
  attempt: number,
  { statusMessage, error }: { statusMessage: string; error: AttemptEnd['error'] },
): Promise<boolean> {
  const ended = attemptEndColumns({ outcome: 'paused', error });
  return db.transaction().execute(async (trx) => {
    const { rows } = await sql<{ task_id: string }>`
      with paused as (
        update tasks set paused_at = now(), status_message = ${statusMessage}, failures = failures + 1,
          leased_by = null, lease_expires_at = null, last_updated_at = now()
        where task_id = ${taskId} and attempt = ${attempt} and status = 'working'
        returning task_id
      ), ended as (
        update task_attempts set ended_at = ${ended.ended_at}, outcome = ${ended.outcome},
          error_message = ${ended.error_message}, error_stack = ${ended.error_stack}
        where task_id = ${taskId} and attempt = ${attempt} and exists (select 1 from paused)
      )
      select task_id from paused`.execute(trx);
    if (rows.length === 0) return false;
    await settleCancelRequest(trx, taskId);
    return true;
  });
}

/** Which paused tasks to resume: by id, or by tool, principal and how recently they paused. */
export interface PausedSelection {
  taskIds?: readonly string[] | undefined;
  tool?: string | undefined;
  principal?: string | undefined;
  /** Only tasks paused at most this long ago. */
  pausedWithinMs?: number | undefined;
  /**
   * Only tasks paused before this (a bulk resume's start): a task that pauses again while the resume
   * pages through the others is not resumed a second time.
   */
  pausedBefore?: Date | undefined;
}

/** At most this many tasks are resumed by one call (a bulk resume pages through the rest). */
export const MAX_RESUME_BATCH = 1_000;

/** The selected paused tasks, in the order they paused, a batch at a time. */
function pausedTasks(db: Kysely<Database>, selection: PausedSelection) {
  return selectPaused(db, selection).orderBy('paused_at').orderBy('task_id').limit(MAX_RESUME_BATCH);
}

function selectPaused(db: Kysely<Database>, selection: PausedSelection) {
  let query = db
    .selectFrom('tasks')
    .where('status', '=', 'working')
    .where('paused_at', 'is not', null)
    .where('parent_task_id', 'is', null);
  if (selection.taskIds !== undefined) query = query.where('task_id', 'in', [...selection.taskIds, '']);
  if (selection.tool !== undefined) query = query.where('tool_name', '=', selection.tool);
  if (selection.principal !== undefined) query = query.where('principal', '=', selection.principal);
  if (selection.pausedWithinMs !== undefined) {
    query = query.where(
      'paused_at',
      '>=',
      sql<Date>`now() - ${selection.pausedWithinMs} * interval '1 millisecond'`,
    );
  }
  if (selection.pausedBefore !== undefined) query = query.where('paused_at', '<=', selection.pausedBefore);
  return query;
}

/** How many paused tasks the selection holds, all of them (a bulk resume's dry run lists a batch). */
export async function countPausedTasks(db: Kysely<Database>, selection: PausedSelection): Promise<number> {
  const row = await selectPaused(db, selection)
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The paused tasks a resume would touch, without touching them (a bulk resume's dry run). */
export async function findPausedTasks(
  db: Kysely<Database>,
  selection: PausedSelection,
): Promise<{ taskId: string; toolName: string; principal: string; pausedAt: Date }[]> {
  const rows = await pausedTasks(db, selection)
    .select(['task_id', 'tool_name', 'principal', 'paused_at'])
    .execute();
  return rows.map((r) => ({
    taskId: r.task_id,
    toolName: r.tool_name,
    principal: r.principal,
    pausedAt: r.paused_at!,
  }));
}

/**
 * Resumes the selected paused tasks: each one, in one transaction, is unpaused (guarded: still paused,
 * still `working`), gets a fresh count of attempts and a status message saying who resumed it, has a
 * run queued, and records the action. Returns the ids it resumed (a task resumed or cancelled meanwhile
 * by someone else is skipped).
 */
export async function resumeTasks(
  db: Kysely<Database>,
  queue: TaskQueue,
  selection: PausedSelection,
  actor: Actor,
): Promise<string[]> {
  return db.transaction().execute(async (trx) => {
    const rows = await trx
      .updateTable('tasks')
      .set({
        paused_at: null,
        // (A pause its owner asked for before the attempts ran out is taken by this one.)
        pause_requested_at: null,
        failures: 0,
        status_message: `Resumed by ${actor}`,
        // As for any queued run: a delivery lost before its claim is redelivered past this deadline.
        lease_expires_at: claimDeadline(),
        last_updated_at: sql`now()`,
      })
      .where('task_id', 'in', pausedTasks(trx, selection).select('task_id').forUpdate().skipLocked())
      .where('status', '=', 'working')
      .where('paused_at', 'is not', null)
      .returning('task_id')
      .execute();
    const resumed = rows.map((r) => r.task_id);
    // Its steps' own retry policies count afresh too: their starts are forgotten, their failures counted
    // from 0 in the operator's view (the last errors stay).
    if (resumed.length > 0) {
      await trx
        .updateTable('task_step_failures')
        .set({ failures: 0 })
        .where('task_id', 'in', resumed)
        .execute();
      await trx.deleteFrom('task_step_starts').where('task_id', 'in', resumed).execute();
    }
    for (const taskId of resumed) await queue.enqueueRun(trx, taskId);
    await recordAction(
      trx,
      resumed,
      actor,
      'resume',
      selection.taskIds === undefined ? { filter: filterOf(selection) } : {},
    );
    return resumed;
  });
}

function filterOf(selection: PausedSelection): Record<string, unknown> {
  return {
    ...(selection.tool !== undefined && { tool: selection.tool }),
    ...(selection.principal !== undefined && { principal: selection.principal }),
    ...(selection.pausedWithinMs !== undefined && { pausedWithinMs: selection.pausedWithinMs }),
  };
}
