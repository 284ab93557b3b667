import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { JsonObject, TaskStatus } from '../../core/wire.ts';
import { ACTIVE_STATUSES } from '../status.ts';
import type { AttemptEnd } from './attempt-ends.ts';

export type Outcome =
  | { status: 'completed'; result: JsonObject; statusMessage?: string }
  | { status: 'failed'; error: JsonObject; statusMessage: string }
  | { status: 'cancelled'; statusMessage: string };

export interface Finish {
  taskId: string;
  attempt: number;
  outcome: Outcome;
  /** What the handler threw, when it ended in a crash: kept on the attempt's row for operators. */
  crash?: AttemptEnd['error'];
}

/**
 * Ends an attempt: one guarded UPDATE from `working`, fenced by attempt, so a worker that lost its
 * lease can never overwrite the attempt that replaced it. False when the fence did not hold.
 *
 * An acknowledged `tasks/cancel` wins over an outcome that arrives after it: a handler that finished
 * before it noticed the request (its cancel check could not reach the database, say) still ends the
 * task `cancelled`, so a client told its cancel was accepted never sees the work complete.
 */
export async function finishAttempt(
  db: Kysely<Database>,
  taskId: string,
  attempt: number,
  outcome: Outcome,
): Promise<boolean> {
  const [landed] = await finishAttempts(db, [{ taskId, attempt, outcome }]);
  return landed === true;
}

/**
 * finishAttempt for several attempts in one statement (and one commit), each fenced on its own: the
 * answer says, in order, whose write landed. The worker batches its concurrent legs' completions so.
 */
export async function finishAttempts(db: Kysely<Database>, finishes: readonly Finish[]): Promise<boolean[]> {
  if (finishes.length === 0) return [];
  const rows = finishes.map(({ taskId, attempt, outcome, crash }) => ({
    task_id: taskId,
    attempt,
    status: outcome.status satisfies TaskStatus,
    result: outcome.status === 'completed' ? outcome.result : null,
    error: outcome.status === 'failed' ? outcome.error : null,
    status_message: outcome.statusMessage ?? null,
    // A tool result with isError ends the task `failed` where the task says so (tool_error_fails).
    is_error: outcome.status === 'completed' && outcome.result.isError === true,
    error_message: crash?.message ?? null,
    error_stack: crash?.stack ?? null,
  }));
  const cancelled = sql`t.cancel_requested_at is not null`;
  // The attempt's own row records how it ended (the status it wrote), in the same statement.
  const { rows: landed } = await sql<{ task_id: string; attempt: number }>`
    with v as (
      select * from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as v(task_id text, attempt int,
        status text, result jsonb, error jsonb, status_message text, is_error boolean, error_message text,
        error_stack text)
    ), landed as (
      update tasks t set
        status = case when ${cancelled} then 'cancelled'
          when v.is_error and t.tool_error_fails then 'failed' else v.status end,
        result = case when ${cancelled} then null else v.result end,
        error = case when ${cancelled} then null else v.error end,
        status_message = case when ${cancelled} then 'Cancelled by request'
          else coalesce(v.status_message, t.status_message) end,
        leased_by = null,
        lease_expires_at = null,
        last_updated_at = now()
      from v
      where t.task_id = v.task_id and t.attempt = v.attempt and t.status = ${'working' satisfies TaskStatus}
      returning t.task_id, t.attempt, t.status
    ), ended as (
      update task_attempts a set ended_at = now(), outcome = l.status, error_message = v.error_message,
        error_stack = v.error_stack
      from landed l join v on v.task_id = l.task_id and v.attempt = l.attempt
      where a.task_id = l.task_id and a.attempt = l.attempt
    )
    select task_id, attempt from landed`.execute(db);
  const done = new Set(landed.map((r) => `${r.attempt}:${r.task_id}`));
  return finishes.map((f) => done.has(`${f.attempt}:${f.taskId}`));
}

/** What a task ended by its cancel request is set to: `cancelled`, released, paused no more. */
export const CANCELLED_COLUMNS = {
  status: 'cancelled',
  status_message: 'Cancelled by request',
  paused_at: null,
  leased_by: null,
  lease_expires_at: null,
  last_updated_at: sql<Date>`now()`,
} as const;

/** Turns a cancel request that no attempt is honouring (task not claimable) into `cancelled`. */
export async function settleCancelRequest(db: Kysely<Database>, taskId: string): Promise<boolean> {
  const row = await db
    .updateTable('tasks')
    .set(CANCELLED_COLUMNS)
    .where('task_id', '=', taskId)
    .where('status', 'in', ACTIVE_STATUSES)
    .where('cancel_requested_at', 'is not', null)
    // Never under a live attempt: that one stops by itself and settles the cancel.
    .where((eb) => eb.or([eb('leased_by', 'is', null), eb('lease_expires_at', '<', sql<Date>`now()`)]))
    .returning('task_id')
    .executeTakeFirst();
  return row !== undefined;
}

/** Throttled `statusMessage` writes from a running attempt; fenced like every other write. */
export async function setStatusMessage(
  db: Kysely<Database>,
  taskId: string,
  attempt: number,
  message: string,
): Promise<void> {
  await db
    .updateTable('tasks')
    .set({ status_message: message, last_updated_at: sql`now()` })
    .where('task_id', '=', taskId)
    .where('attempt', '=', attempt)
    .where('status', '=', 'working')
    .execute();
}
