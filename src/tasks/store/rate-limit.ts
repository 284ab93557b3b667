// A tool's rate limit (`defineTool({ rateLimit })`): at most `limit` first legs per `per` ms per key,
// cluster-wide. A sliding log of starts per key (task_rate_starts), counted and appended under the key's
// advisory lock by the claim of a first leg (claim.ts): any `per` ms window holds at most `limit` starts.
// A start is stamped `now()`, its transaction's start, the same instant as its attempt's `claimed_at`;
// it is counted against every start after `now() - per`, later ones included, so stamps that land out of
// order (a transaction that waited for the lock) still never put `limit + 1` in one window.
//
// Waiting is a hand-off, not a herd: each start in the window hands its place, one window later, to one
// waiting task (its successor), which is queued to run exactly then. A task refused takes the earliest
// place in the window nobody holds; when every place is held it waits until a new start picks it (the
// oldest waiting first). So a backlog comes back `limit` per window, each at the instant its place frees.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { claimDeadline } from './lease.ts';

/** A task's rate limit, as stored with it. */
export interface StoredRateLimit {
  key: string;
  limit: number;
  perMs: number;
}

/** Queues a run of `taskId` in `delayMs`, in this transaction. */
export type RunLater = (trx: Kysely<Database>, taskId: string, delayMs: number) => Promise<void>;

/** The statusMessage of a task waiting for its rate limit (its prefix marks it, to clear it at the start). */
export const RATE_WAIT_PREFIX = 'Waiting for the rate limit';

/** Serializes the counting and recording of a key's starts (across processes), until commit. */
export function lockRateKey(key: string) {
  return sql`select pg_advisory_xact_lock(hashtextextended(${`rate:${key}`}, 0))`;
}

const inWindow = (perMs: number) => sql<boolean>`started_at > now() - ${perMs} * interval '1 millisecond'`;

/** A condition: the key's window has room for one more start (call under lockRateKey). */
export function rateWindowHasRoom({ key, limit, perMs }: StoredRateLimit) {
  return sql<boolean>`(select count(*) from task_rate_starts
    where rate_key = ${key} and ${inWindow(perMs)}) < ${limit}::int`;
}

/** Makes `taskId` wait `delayMs` for its place (not claimable before), and queues its run then. */
async function awaitPlace(
  trx: Kysely<Database>,
  rate: StoredRateLimit,
  taskId: string,
  delayMs: number,
  runLater: RunLater | undefined,
): Promise<void> {
  const until = new Date(Date.now() + delayMs).toISOString();
  await trx
    .updateTable('tasks')
    .set({
      run_after: sql<Date>`now() + ${delayMs} * interval '1 millisecond'`,
      lease_expires_at: claimDeadline(delayMs),
      status_message: `${RATE_WAIT_PREFIX} (${rate.limit} starts per ${rate.perMs} ms): starts at about ${until}`,
      last_updated_at: sql`now()`,
    })
    .where('task_id', '=', taskId)
    .execute();
  await runLater?.(trx, taskId, delayMs);
}

/**
 * Records a claimed first leg's start (dropping the key's starts no window counts any more), and hands
 * its place, one window on, to the oldest task of the key waiting without one.
 */
export async function recordRateStart(
  trx: Kysely<Database>,
  rate: StoredRateLimit,
  taskId: string,
  runLater: RunLater | undefined,
): Promise<void> {
  const { key, perMs } = rate;
  const { rows } = await sql<{ task_id: string }>`
    with pruned as (
      delete from task_rate_starts where rate_key = ${key} and not ${inWindow(perMs)}
    ), successor as (
      select task_id from tasks
      where rate_key = ${key} and status = 'working' and attempt = 0 and leased_by is null
        and cancel_requested_at is null and paused_at is null and task_id <> ${taskId}
        -- Not one that holds a place already (its run_after says when), nor a debounced one not due.
        and run_after is null
      order by created_at limit 1
      for update skip locked
    )
    insert into task_rate_starts (rate_key, started_at, task_id, successor_task_id)
    values (${key}, now(), ${taskId}, (select task_id from successor))
    returning successor_task_id as task_id`.execute(trx);
  await trx
    .updateTable('tasks')
    .set({ status_message: null })
    .where('task_id', '=', taskId)
    .where('status_message', 'like', `${RATE_WAIT_PREFIX}%`)
    .execute();
  const successor = rows[0]?.task_id;
  if (successor != null) await awaitPlace(trx, rate, successor, perMs, runLater);
}

/**
 * A task its rate limit refused (the window is full): takes the earliest place in the window that no
 * waiting task holds (its start's successor is unset, or no longer waits: cancelled, finished, started)
 * and runs when that start leaves the window; when every place is held, it waits for a new start to
 * hand it one (its claim deadline, pushed a window on, is the backstop).
 */
export async function waitForRatePlace(
  trx: Kysely<Database>,
  rate: StoredRateLimit,
  taskId: string,
  runLater: RunLater | undefined,
): Promise<void> {
  const { key, perMs } = rate;
  const { rows } = await sql<{ in_ms: number }>`
    with place as (
      select ctid from task_rate_starts s
      where rate_key = ${key} and ${inWindow(perMs)}
        and (successor_task_id is null or not exists (
          select 1 from tasks t where t.task_id = s.successor_task_id and t.status = 'working'
            and t.attempt = 0 and t.cancel_requested_at is null and t.task_id <> ${taskId}))
      order by started_at limit 1
    )
    update task_rate_starts s set successor_task_id = ${taskId} from place where s.ctid = place.ctid
    returning greatest(0, extract(epoch from (s.started_at + ${perMs} * interval '1 millisecond' - now())) * 1000)::float8
      as in_ms`.execute(trx);
  const inMs = rows[0]?.in_ms;
  if (inMs !== undefined) return awaitPlace(trx, rate, taskId, Math.ceil(inMs), runLater);
  await trx
    .updateTable('tasks')
    .set({
      // Holds no place: a new start picks it (recordRateStart), oldest first.
      run_after: null,
      lease_expires_at: claimDeadline(perMs),
      status_message: `${RATE_WAIT_PREFIX} (${rate.limit} starts per ${rate.perMs} ms): queued`,
      last_updated_at: sql`now()`,
    })
    .where('task_id', '=', taskId)
    .execute();
}
