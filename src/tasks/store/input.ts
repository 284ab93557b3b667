import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/database.ts';
import { TaskNotFoundError } from '../errors.ts';
import type { InputRequests, InputResponses } from '../../core/wire.ts';
import { claimDeadline, LeaseLostError } from './lease.ts';

export interface AnswerOutcome {
  /** How many outstanding requests this call answered. */
  answered: number;
  /** True when nothing is outstanding any more and the task went back to `working`. */
  resumed: boolean;
  /** When resumed: how long the longest-waiting of the requests answered now had waited, and the tool. */
  waited?: { seconds: number; toolName: string };
}

/**
 * Stores responses for outstanding keys only (unknown and already-answered keys are ignored). The task
 * row is locked first, so concurrent partial answers serialize and exactly one of them resumes the task.
 */
export async function answerInputRequests(
  trx: Transaction<Database>,
  taskId: string,
  principal: string,
  responses: InputResponses,
): Promise<AnswerOutcome> {
  const task = await trx
    .selectFrom('tasks')
    .select(['status', 'tool_name'])
    .where('task_id', '=', taskId)
    .where('principal', '=', principal)
    .forUpdate()
    .executeTakeFirst();
  if (task === undefined) throw new TaskNotFoundError(taskId);
  if (task.status !== 'input_required') return { answered: 0, resumed: false };

  const answered = await sql<{ key: string; waited: number }>`
    update task_input_requests r
       set response = e.value, answered_at = now()
      from jsonb_each(${JSON.stringify(responses)}::jsonb) e
     where r.task_id = ${taskId} and r.key = e.key and r.response is null
    returning r.key, extract(epoch from now() - r.created_at)::float8 as waited`.execute(trx);
  const count = answered.rows.length;
  if (count === 0) return { answered: 0, resumed: false };

  const resumed = await trx
    .updateTable('tasks')
    .set({
      status: 'working',
      leased_by: null,
      lease_expires_at: claimDeadline(),
      last_updated_at: sql`now()`,
    })
    .where('task_id', '=', taskId)
    .where('status', '=', 'input_required')
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('task_input_requests')
            .select('key')
            .where('task_id', '=', taskId)
            .where('response', 'is', null),
        ),
      ),
    )
    .returning('task_id')
    .executeTakeFirst();
  if (resumed === undefined) {
    // Partly answered: the set of outstanding requests changed, and so did the task.
    await trx
      .updateTable('tasks')
      .set({ last_updated_at: sql`now()` })
      .where('task_id', '=', taskId)
      .execute();
  }
  if (resumed === undefined) return { answered: count, resumed: false };
  const seconds = Math.max(0, ...answered.rows.map((r) => Number(r.waited)));
  return { answered: count, resumed: true, waited: { seconds, toolName: task.tool_name } };
}

/**
 * Parks a running attempt in `input_required` with its new requests, fenced by attempt: a worker that
 * lost its lease, or a task cancelled meanwhile, changes nothing (LeaseLostError).
 */
export async function suspendForInput(
  db: Kysely<Database>,
  taskId: string,
  attempt: number,
  requests: InputRequests,
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const parked = await trx
      .updateTable('tasks')
      .set({ status: 'input_required', leased_by: null, lease_expires_at: null, last_updated_at: sql`now()` })
      .where('task_id', '=', taskId)
      .where('attempt', '=', attempt)
      .where('status', '=', 'working')
      .where('cancel_requested_at', 'is', null)
      .returning('task_id')
      .executeTakeFirst();
    if (parked === undefined) throw new LeaseLostError(taskId, attempt);
    await trx
      .insertInto('task_input_requests')
      .values(
        Object.entries(requests).map(([key, request]) => ({
          task_id: taskId,
          key,
          request: JSON.stringify(request),
        })),
      )
      .onConflict((oc) => oc.columns(['task_id', 'key']).doNothing())
      .execute();
  });
}

/** Every input request of a task with its response (if any), for replaying the handler. */
export async function loadInputs(
  db: Kysely<Database>,
  taskId: string,
): Promise<Map<string, { request: unknown; response: unknown }>> {
  const rows = await db
    .selectFrom('task_input_requests')
    .select(['key', 'request', 'response'])
    .where('task_id', '=', taskId)
    .execute();
  return new Map(rows.map((r) => [r.key, { request: r.request, response: r.response }]));
}
