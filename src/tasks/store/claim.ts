import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import {
  claimCtes,
  claimDeadline,
  REDELIVERY_MS,
  toClaimedTask,
  type ClaimedRow,
  type ClaimedTask,
} from './lease.ts';

/**
 * Starts a new attempt of a `working` task: bumps `attempt` (the fence every later write names) and
 * records the lease. Undefined when the task is not runnable (terminal, waiting for input, cancelled),
 * another attempt still holds a live lease (a duplicate delivery must not steal a running task), or its
 * concurrency key's limit is reached (see claimKeyedTask).
 */
export async function claimTask(
  db: Kysely<Database>,
  taskId: string,
  workerId: string,
  leaseMs: number,
): Promise<ClaimedTask | undefined> {
  return (await claimTasks(db, [taskId], workerId, leaseMs)).get(taskId);
}

/**
 * claimTask for a batch of deliveries: the tasks that are runnable, by id. One statement for those
 * without a concurrency key; a short transaction each for those with one.
 */
export async function claimTasks(
  db: Kysely<Database>,
  taskIds: readonly string[],
  workerId: string,
  leaseMs: number,
): Promise<Map<string, ClaimedTask>> {
  if (taskIds.length === 0) return new Map();
  const ids = sql`select unnest(${[...taskIds]}::text[])`;
  const { rows } = await sql<ClaimedRow>`
    with ${claimCtes(ids, workerId, leaseMs)} select * from claimed`.execute(db);
  const claimed = new Map(rows.map((row) => [row.task_id, toClaimedTask(row)]));
  const rest = taskIds.filter((id) => !claimed.has(id));
  if (rest.length === 0) return claimed;
  const keyed = await db
    .selectFrom('tasks')
    .select(['task_id', 'concurrency_key', 'concurrency_limit'])
    .where('task_id', 'in', rest)
    .where('concurrency_key', 'is not', null)
    .where('status', '=', 'working')
    .execute();
  for (const task of keyed) {
    const key = { key: task.concurrency_key!, limit: task.concurrency_limit ?? 1 };
    const got = await claimKeyedTask(db, task.task_id, key, workerId, leaseMs);
    if (got !== undefined) claimed.set(task.task_id, got);
  }
  return claimed;
}

/** Serializes everything that counts or hands over a key's legs (across processes), until commit. */
function lockKey(key: string) {
  return sql`select pg_advisory_xact_lock(hashtextextended(${`concurrency:${key}`}, 0))`;
}

/** A key's legs running now: held by a live lease (a parked task holds none). */
function runningLegs(key: string) {
  return sql`select count(*)::int from tasks
    where concurrency_key = ${key} and leased_by is not null and lease_expires_at > now() and status = 'working'`;
}

/**
 * Claims a task whose tool caps its concurrency per key, if fewer than `limit` legs with its key run:
 * counted and claimed under the key's lock, so that two workers never both take the last place. A task
 * refused for the limit waits (unleased, its claim deadline renewed: the sweeper's backstop) until a
 * leg with its key ends and wakes the oldest waiting one (wakeNextForKey).
 */
async function claimKeyedTask(
  db: Kysely<Database>,
  taskId: string,
  { key, limit }: { key: string; limit: number },
  workerId: string,
  leaseMs: number,
): Promise<ClaimedTask | undefined> {
  return db.transaction().execute(async (trx) => {
    await lockKey(key).execute(trx);
    const ids = sql`select ${taskId}::text where (${runningLegs(key)}) < ${limit}::int`;
    const { rows } = await sql<ClaimedRow>`
      with ${claimCtes(ids, workerId, leaseMs, { keyed: true })} select * from claimed`.execute(trx);
    const [row] = rows;
    if (row !== undefined) return toClaimedTask(row);
    await trx
      .updateTable('tasks')
      .set({ lease_expires_at: claimDeadline() })
      .where('task_id', '=', taskId)
      .where('status', '=', 'working')
      .where('leased_by', 'is', null)
      .where('paused_at', 'is', null)
      .execute();
    return undefined;
  });
}

/**
 * After a leg with this key ended: the oldest task waiting for the key (refused by the limit, or
 * queued), if any, for the caller to enqueue in this transaction. A task sleeping until later is not
 * one (its run comes at its deadline). Under the key's lock, so that a refusal committing meanwhile is
 * seen here or finds the freed place itself.
 */
export async function nextWaitingForKey(trx: Kysely<Database>, key: string): Promise<string | undefined> {
  await lockKey(key).execute(trx);
  const row = await trx
    .selectFrom('tasks')
    .select('task_id')
    .where('concurrency_key', '=', key)
    .where('status', '=', 'working')
    .where('leased_by', 'is', null)
    .where('cancel_requested_at', 'is', null)
    .where('paused_at', 'is', null)
    .where('lease_expires_at', '<=', sql<Date>`now() + ${REDELIVERY_MS} * interval '1 millisecond'`)
    .orderBy('created_at')
    .limit(1)
    .executeTakeFirst();
  return row?.task_id;
}
