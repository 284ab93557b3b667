// Steering messages (`tasks/steer`, SEP-2669 draft): stored numbered per task, read by the handler as
// steps (worker/attempt-steering.ts). A task waiting for one is woken by the message's own transaction.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { ACTIVE_STATUSES } from '../status.ts';

/** The step under which the handler's `n`th steering read records what it returned. */
export const steeringReadStepName = (n: number) => `steering:${n}`;

/** The step under which the `n`th read, when it had to wait, records until when (an ISO time, or null). */
export const steeringWaitStepName = (n: number) => `steering:${n}:wait`;

/** A steering message as a read step records it (JSON: `sentAt` is an ISO time). */
export interface StoredSteering {
  seq: number;
  message: string;
  sentAt: string;
}

/** What `tasks/steer` may do: the tools whose handlers read steering, and how many messages a task takes. */
export interface SteeringLimits {
  readers: readonly string[];
  /** MAX_STEERING_MESSAGES_PER_TASK. */
  maxMessages: number;
}

/**
 * A task waits for steering: a read recorded its wait and not yet what it returned. (Its wait step is
 * saved before the leg parks; a message that comes meanwhile is seen by the park's own look.)
 */
const WAITING = sql<boolean>`exists (
    select 1 from task_steps w where w.task_id = t.task_id and w.name like 'steering:%:wait'
      and not exists (select 1 from task_steps r where r.task_id = w.task_id and r.name = left(w.name, -5)))`;

/**
 * Stores a steering message for the principal's active task of a tool that reads steering, unless it
 * already got `maxMessages`: one guarded statement, which numbers it. `wake` says the task waits for
 * it with no attempt holding it: the caller queues its run in this transaction. Undefined when nothing
 * was stored (see steeringRefusal).
 */
export async function sendSteering(
  db: Kysely<Database>,
  {
    taskId,
    principal,
    message,
    readers,
    maxMessages,
  }: SteeringLimits & {
    taskId: string;
    principal: string;
    message: string;
  },
): Promise<{ seq: number; wake: boolean } | undefined> {
  if (readers.length === 0) return undefined;
  const { rows } = await sql<{ seq: number; wake: boolean }>`
    with sent as (
      update tasks t set steering_sent = t.steering_sent + 1
      where t.task_id = ${taskId} and t.principal = ${principal} and t.parent_task_id is null
        and t.status in (${sql.join([...ACTIVE_STATUSES])}) and t.tool_name in (${sql.join([...readers])})
        and t.steering_sent < ${maxMessages}
      returning t.task_id, t.steering_sent,
        t.status = 'working' and t.paused_at is null and t.leased_by is null and ${WAITING} as wake
    ), stored as (
      insert into task_steering (task_id, seq, message) select task_id, steering_sent, ${message} from sent
    )
    select steering_sent as seq, wake from sent`.execute(db);
  return rows[0];
}

/** Why sendSteering stored nothing for a task its principal can see: what the client is told. */
export async function steeringRefusal(
  db: Kysely<Database>,
  taskId: string,
  { readers, maxMessages }: SteeringLimits,
): Promise<{ reason: 'not_read' | 'ended' | 'too_many'; message: string }> {
  const row = await db
    .selectFrom('tasks')
    .select(['tool_name', 'status', 'steering_sent', 'parent_task_id'])
    .where('task_id', '=', taskId)
    .executeTakeFirst();
  if (row === undefined || row.parent_task_id !== null || !readers.includes(row.tool_name)) {
    const tool = row?.tool_name ?? 'its tool';
    return {
      reason: 'not_read',
      message: `tool ${tool} does not read steering messages (its definition has no steering: true): nothing was stored`,
    };
  }
  if (!(ACTIVE_STATUSES as readonly string[]).includes(row.status)) {
    return {
      reason: 'ended',
      message: `the task has ended (${row.status}): it reads no more steering messages`,
    };
  }
  return {
    reason: 'too_many',
    message: `the task already got ${row.steering_sent} steering messages, the most one task takes (MAX_STEERING_MESSAGES_PER_TASK ${maxMessages})`,
  };
}

/** The task's messages after `afterSeq`, oldest first (at most `limit`). */
export async function readSteering(
  db: Kysely<Database>,
  taskId: string,
  afterSeq: number,
  limit?: number,
): Promise<StoredSteering[]> {
  let query = db
    .selectFrom('task_steering')
    .select(['seq', 'message', 'sent_at'])
    .where('task_id', '=', taskId)
    .where('seq', '>', afterSeq)
    .orderBy('seq');
  if (limit !== undefined) query = query.limit(limit);
  const rows = await query.execute();
  return rows.map((r) => ({ seq: r.seq, message: r.message, sentAt: r.sent_at.toISOString() }));
}

/** Whether a message after `afterSeq` was sent (a parking wait's last look). */
export async function hasSteeringAfter(
  db: Kysely<Database>,
  taskId: string,
  afterSeq: number,
): Promise<boolean> {
  const row = await db
    .selectFrom('task_steering')
    .select('seq')
    .where('task_id', '=', taskId)
    .where('seq', '>', afterSeq)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * A fork's copy of its source's messages and count: the reads among the copied steps replay what they
 * returned, and the fork's later reads go on from there (with the messages they did not read yet).
 */
export async function copySteering(db: Kysely<Database>, sourceId: string, taskId: string): Promise<void> {
  await sql`
    insert into task_steering (task_id, seq, message, sent_at)
    select ${taskId}, seq, message, sent_at from task_steering where task_id = ${sourceId}`.execute(db);
  await sql`
    update tasks set steering_sent = (select steering_sent from tasks where task_id = ${sourceId})
    where task_id = ${taskId}`.execute(db);
}
