import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { JsonObject, TaskStatus } from '../../core/wire.ts';
import { ACTIVE_STATUSES } from '../status.ts';

type Outcome =
  | { status: 'completed'; result: JsonObject; statusMessage?: string }
  | { status: 'failed'; error: JsonObject; statusMessage: string }
  | { status: 'cancelled'; statusMessage: string };

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
  const cancelled = sql<boolean>`cancel_requested_at is not null`;
  const isErrorResult = outcome.status === 'completed' && outcome.result.isError === true;
  const result = outcome.status === 'completed' ? JSON.stringify(outcome.result) : null;
  const error = outcome.status === 'failed' ? JSON.stringify(outcome.error) : null;
  const row = await db
    .updateTable('tasks')
    .set({
      // At 2025-11-25 (a task a session created) a tool result with isError ends the task `failed`.
      status: sql`case when ${cancelled} then 'cancelled'
        when ${isErrorResult} and session_id is not null then 'failed'
        else ${outcome.status satisfies TaskStatus} end`,
      result: sql`case when ${cancelled} then null else ${result}::jsonb end`,
      error: sql`case when ${cancelled} then null else ${error}::jsonb end`,
      status_message: sql`case when ${cancelled} then 'Cancelled by request' else ${
        outcome.statusMessage ?? sql`status_message`
      } end`,
      leased_by: null,
      lease_expires_at: null,
      last_updated_at: sql`now()`,
    })
    .where('task_id', '=', taskId)
    .where('attempt', '=', attempt)
    .where('status', '=', 'working')
    .returning('task_id')
    .executeTakeFirst();
  return row !== undefined;
}

/** Turns a cancel request that no attempt is honouring (task not claimable) into `cancelled`. */
export async function settleCancelRequest(db: Kysely<Database>, taskId: string): Promise<boolean> {
  const row = await db
    .updateTable('tasks')
    .set({
      status: 'cancelled',
      status_message: 'Cancelled by request',
      leased_by: null,
      lease_expires_at: null,
      last_updated_at: sql`now()`,
    })
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
