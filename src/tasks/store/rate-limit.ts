// A tool's rate limit (`defineTool({ rateLimit })`): at most `limit` first legs per `per` ms per key,
// cluster-wide. A sliding log of starts per key (task_rate_starts), counted and appended under the key's
// advisory lock by the claim of a first leg (claim.ts): any `per` ms window holds at most `limit` starts.
// A start is stamped `now()`, its transaction's start, the same instant as its attempt's `claimed_at`;
// a start is counted against every start after `now() - per`, later ones included, so stamps that land
// out of order (a transaction that waited for the lock) still never put `limit + 1` in one window.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';

/** A task's rate limit, as stored with it. */
export interface StoredRateLimit {
  key: string;
  limit: number;
  perMs: number;
}

/** The statusMessage of a task waiting for its rate limit (its prefix marks it, to clear it at the start). */
export const RATE_WAIT_PREFIX = 'Waiting for the rate limit';

/** Serializes the counting and recording of a key's starts (across processes), until commit. */
export function lockRateKey(key: string) {
  return sql`select pg_advisory_xact_lock(hashtextextended(${`rate:${key}`}, 0))`;
}

/** A condition: the key's window has room for one more start (call under lockRateKey). */
export function rateWindowHasRoom({ key, limit, perMs }: StoredRateLimit) {
  return sql<boolean>`(select count(*) from task_rate_starts
    where rate_key = ${key} and started_at > now() - ${perMs} * interval '1 millisecond') < ${limit}::int`;
}

/** Records a claimed first leg's start, and drops the key's starts no window counts any more. */
export async function recordRateStart(
  trx: Kysely<Database>,
  { key, perMs }: StoredRateLimit,
  taskId: string,
): Promise<void> {
  await sql`with pruned as (
      delete from task_rate_starts
      where rate_key = ${key} and started_at <= now() - ${perMs} * interval '1 millisecond'
    )
    insert into task_rate_starts (rate_key, started_at, task_id) values (${key}, now(), ${taskId})`.execute(
    trx,
  );
  await trx
    .updateTable('tasks')
    .set({ status_message: null })
    .where('task_id', '=', taskId)
    .where('status_message', 'like', `${RATE_WAIT_PREFIX}%`)
    .execute();
}

/**
 * How long a task refused by its rate limit waits before its claim is tried again, in ms: until the
 * window has room (the `limit`-th latest start leaves it), plus one window for every `limit` tasks of the
 * key created before it that wait too, so that a backlog comes back about `limit` per window instead of
 * all at once. 0 when the window has room now.
 */
export async function rateWaitMs(
  trx: Kysely<Database>,
  { key, limit, perMs }: StoredRateLimit,
  taskId: string,
): Promise<number> {
  const { rows } = await sql<{ room_in_ms: number; ahead: number }>`
    select greatest(0, coalesce((
        select extract(epoch from (started_at + ${perMs} * interval '1 millisecond' - now())) * 1000
        from task_rate_starts where rate_key = ${key}
        order by started_at desc offset ${limit - 1} limit 1), 0))::float8 as room_in_ms,
      (select count(*) from tasks w where w.rate_key = ${key} and w.status = 'working'
         and w.leased_by is null and w.attempt = 0 and w.cancel_requested_at is null
         and w.created_at < (select created_at from tasks where task_id = ${taskId}))::int as ahead`.execute(
    trx,
  );
  const row = rows[0];
  if (row === undefined || row.room_in_ms <= 0) return 0;
  return Math.ceil(row.room_in_ms) + Math.floor(row.ahead / limit) * perMs;
}

/** The statusMessage of a task that waits `delayMs` for its rate limit. */
export function rateWaitMessage({ limit, perMs }: StoredRateLimit, delayMs: number): string {
  const until = new Date(Date.now() + delayMs).toISOString();
  return `${RATE_WAIT_PREFIX} (${limit} starts per ${perMs} ms) until about ${until}`;
}
