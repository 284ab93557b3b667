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
import {
  lockRateKey,
  rateWindowHasRoom,
  recordRateStart,
  waitForRatePlace,
  type RunLater,
  type StoredRateLimit,
} from './rate-limit.ts';

export type { RunLater };

/**
 * Starts a new attempt of a `working` task: bumps `attempt` (the fence every later write names) and
 * records the lease. Undefined when the task is not runnable (terminal, waiting for input, cancelled),
 * another attempt still holds a live lease (a duplicate delivery must not steal a running task), its
 * concurrency key's limit is reached, or (a first leg) its rate limit's window is full (see claimGatedTask).
 */
export async function claimTask(
  db: Kysely<Database>,
  taskId: string,
  workerId: string,
  leaseMs: number,
  runLater?: RunLater,
): Promise<ClaimedTask | undefined> {
  return (await claimTasks(db, [taskId], workerId, leaseMs, runLater)).get(taskId);
}

/**
 * claimTask for a batch of deliveries: the tasks that are runnable, by id. One statement for those
 * without a concurrency key or a rate limit to count; a short transaction each for those with one. A
 * task refused by its rate limit is run again when the window allows, through `runLater`; without it,
 * the sweeper's redelivery brings it back (its claim deadline is pushed past the wait).
 */
export async function claimTasks(
  db: Kysely<Database>,
  taskIds: readonly string[],
  workerId: string,
  leaseMs: number,
  runLater?: RunLater,
): Promise<Map<string, ClaimedTask>> {
  if (taskIds.length === 0) return new Map();
  const ids = sql`select unnest(${[...taskIds]}::text[])`;
  const { rows } = await sql<ClaimedRow>`
    with ${claimCtes(ids, workerId, leaseMs)} select * from claimed`.execute(db);
  const claimed = new Map(rows.map((row) => [row.task_id, toClaimedTask(row)]));
  const rest = taskIds.filter((id) => !claimed.has(id));
  if (rest.length === 0) return claimed;
  const gated = await db
    .selectFrom('tasks')
    .select([
      'task_id',
      'attempt',
      'concurrency_key',
      'concurrency_limit',
      'rate_key',
      'rate_limit',
      'rate_per_ms',
    ])
    .where('task_id', 'in', rest)
    .where((eb) =>
      eb.or([
        eb('concurrency_key', 'is not', null),
        eb.and([eb('rate_key', 'is not', null), eb('attempt', '=', 0)]),
      ]),
    )
    .where('status', '=', 'working')
    .execute();
  for (const task of gated) {
    const gates: Gates = {
      concurrency:
        task.concurrency_key === null
          ? undefined
          : { key: task.concurrency_key, limit: task.concurrency_limit ?? 1 },
      rate:
        task.rate_key === null || task.attempt > 0
          ? undefined
          : { key: task.rate_key, limit: task.rate_limit ?? 1, perMs: task.rate_per_ms ?? 1 },
    };
    const got = await claimGatedTask(db, task.task_id, gates, { workerId, leaseMs, runLater });
    if (got !== undefined) claimed.set(task.task_id, got);
  }
  return claimed;
}

/** What a claim must count first: the task's concurrency key, and (a first leg) its rate limit. */
interface Gates {
  concurrency: { key: string; limit: number } | undefined;
  rate: StoredRateLimit | undefined;
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
 * Claims a task whose tool caps its concurrency per key, if fewer than `limit` legs with its key run,
 * and, for a first leg of a rate-limited tool, if its key's window has room (the start is recorded):
 * counted and claimed under the keys' locks (concurrency's first, always in that order), so that two
 * workers never both take the last place. A task refused for its concurrency waits (unleased, its claim
 * deadline renewed: the sweeper's backstop) until a leg with its key ends and wakes the oldest waiting
 * one (wakeNextForKey); one refused for its rate limit waits for a place in its window, saying so in
 * its statusMessage, and `runLater` brings it back when it has one (rate-limit.ts). The rate limit
 * counts only the claims that were made: a task cancelled while it waits took nothing.
 */
async function claimGatedTask(
  db: Kysely<Database>,
  taskId: string,
  { concurrency, rate }: Gates,
  { workerId, leaseMs, runLater }: { workerId: string; leaseMs: number; runLater: RunLater | undefined },
): Promise<ClaimedTask | undefined> {
  return db.transaction().execute(async (trx) => {
    if (concurrency !== undefined) await lockKey(concurrency.key).execute(trx);
    if (rate !== undefined) await lockRateKey(rate.key).execute(trx);
    const room = [
      ...(concurrency === undefined
        ? []
        : [sql`(${runningLegs(concurrency.key)}) < ${concurrency.limit}::int`]),
      // A later leg (a retry, a resume) is not a start: only the first is counted.
      ...(rate === undefined ? [] : [sql`(attempt > 0 or ${rateWindowHasRoom(rate)})`]),
    ];
    const ids = sql`select task_id from tasks where task_id = ${taskId} and ${sql.join(room, sql` and `)}`;
    const { rows } = await sql<ClaimedRow>`
      with ${claimCtes(ids, workerId, leaseMs, { keyed: true })} select * from claimed`.execute(trx);
    const [row] = rows;
    if (row !== undefined) {
      if (rate !== undefined && row.attempt === 1) await recordRateStart(trx, rate, taskId, runLater);
      return toClaimedTask(row);
    }
    const full =
      rate !== undefined &&
      (await sql<{ room: boolean }>`select ${rateWindowHasRoom(rate)} as room`.execute(trx)).rows[0]?.room ===
        false;
    const waiting = await trx
      .updateTable('tasks')
      .set({ lease_expires_at: claimDeadline() })
      .where('task_id', '=', taskId)
      .where('status', '=', 'working')
      .where('leased_by', 'is', null)
      .where('paused_at', 'is', null)
      // Not one that is not due yet (it holds a place in its rate window, or a debounce waits): a
      // delivery before its time changes nothing, above all not its place.
      .where((eb) => eb.or([eb('run_after', 'is', null), eb('run_after', '<=', sql<Date>`now()`)]))
      .returning('attempt')
      .executeTakeFirst();
    if (full && waiting?.attempt === 0) await waitForRatePlace(trx, rate, taskId, runLater);
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
