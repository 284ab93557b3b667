import { createHash, randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { ACTIVE_STATUSES } from '../status.ts';
import type { SignalDelivery } from '../../core/signal-delivery.ts';
import { claimCtes, claimedFromJson, LeaseLostError, type ClaimedJson, type ClaimedTask } from './lease.ts';

/** A new signal's token: 192 random bits, base64url (whoever holds it may deliver the signal once). */
export const newSignalToken = () => randomBytes(24).toString('base64url');

/** What the step under which a signal records its handle holds (ctx.createSignal replays it). */
export interface SignalStepValue {
  token: string;
  timeoutAt: string | null;
}

/** The stored form of a signal token (its SHA-256, base64url). */
export const tokenHash = (token: string) => createHash('sha256').update(token).digest('base64url');

/**
 * Records a signal of a running attempt's task (fenced by attempt). A signal of that name recorded by
 * an earlier attempt that died before its step was saved gets the new token: nobody saw the old one.
 */
export async function createSignal(
  db: Kysely<Database>,
  {
    taskId,
    attempt,
    name,
    token,
    timeoutMs,
  }: { taskId: string; attempt: number; name: string; token: string; timeoutMs?: number | undefined },
): Promise<Date | null> {
  const timeoutAt =
    timeoutMs === undefined
      ? sql<Date | null>`null::timestamptz`
      : sql<Date>`now() + ${timeoutMs} * interval '1 millisecond'`;
  const { rows } = await sql<{ timeout_at: Date | null }>`
    insert into task_signals (task_id, name, token_hash, timeout_at)
    select t.task_id, ${name}, ${tokenHash(token)}, ${timeoutAt}
    from tasks t where t.task_id = ${taskId} and t.attempt = ${attempt} and t.status = 'working'
    on conflict (task_id, name) do update set token_hash = excluded.token_hash, timeout_at = excluded.timeout_at
      where task_signals.delivered_at is null
    returning timeout_at`.execute(db);
  if (rows.length === 0) throw new LeaseLostError(taskId, attempt);
  return rows[0]!.timeout_at;
}

export interface SignalState {
  deliveredAt: Date | null;
  payload: unknown;
  timeoutAt: Date | null;
  /** The database's clock, to compare `timeoutAt` with. */
  now: Date;
}

export async function readSignal(
  db: Kysely<Database>,
  taskId: string,
  name: string,
): Promise<SignalState | undefined> {
  const row = await db
    .selectFrom('task_signals')
    .select(['delivered_at', 'payload', 'timeout_at', sql<Date>`now()`.as('now')])
    .where('task_id', '=', taskId)
    .where('name', '=', name)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    deliveredAt: row.delivered_at,
    payload: (row.payload as { value?: unknown } | null)?.value,
    timeoutAt: row.timeout_at,
    now: row.now,
  };
}

/**
 * Stores a signal's delivery once: the first delivery before its timeout, while its task is active,
 * stores the payload and names the task (the caller runs it, in this transaction: a task waiting for the
 * signal resumes; one that has not reached its wait yet finds it there). Every later delivery is
 * refused, saying why.
 */
export async function recordSignalDelivery(
  trx: Kysely<Database>,
  token: string,
  payload: unknown,
): Promise<{ outcome: SignalDelivery; taskId?: string }> {
  const { rows } = await sql<{ task_id: string }>`
    with ${deliveredCte(token, payload)} select task_id from delivered`.execute(trx);
  const delivered = rows[0];
  if (delivered !== undefined) return { outcome: 'delivered', taskId: delivered.task_id };
  return { outcome: await whyRefused(trx, token) };
}

/**
 * recordSignalDelivery and the claim of the task for `claimFor`, in one statement (one round trip, no
 * transaction): the delivery's task, and the claimed task when it was free to claim. When it was not
 * (an attempt that still runs before its wait holds it), that attempt finds the signal at its wait, or
 * as it parks; the caller queues a run for the delivery that commits while it parks.
 */
export async function deliverSignalAndClaim(
  db: Kysely<Database>,
  token: string,
  payload: unknown,
  claimFor: { workerId: string; leaseMs: number },
): Promise<{ outcome: SignalDelivery; taskId?: string; claimed?: ClaimedTask; keyed?: boolean }> {
  const ids = sql`select task_id from delivered`;
  const { rows } = await sql<{
    delivered: string | null;
    claimed: ClaimedJson | null;
    keyed: boolean | null;
  }>`
    with ${deliveredCte(token, payload)}, ${claimCtes(ids, claimFor.workerId, claimFor.leaseMs)}
    select (select task_id from delivered) as delivered, (select row_to_json(claimed) from claimed) as claimed,
      (select concurrency_key is not null from tasks where task_id = (select task_id from delivered)) as keyed`.execute(
    db,
  );
  const row = rows[0]!;
  if (row.delivered === null) return { outcome: await whyRefused(db, token) };
  return {
    outcome: 'delivered',
    taskId: row.delivered,
    ...(row.claimed !== null && {
      claimed: claimedFromJson(row.claimed),
    }),
    // A task with a concurrency key is not claimed here (its key's legs are counted elsewhere): queue it.
    keyed: row.keyed === true,
  };
}

/** The delivery's CTE (`delivered`, the task's id when this delivery was the one that counts). */
function deliveredCte(token: string, payload: unknown) {
  return sql`delivered as (
      update task_signals set delivered_at = now(), payload = ${JSON.stringify({ value: payload })}::jsonb
      where token_hash = ${tokenHash(token)} and delivered_at is null
        and (timeout_at is null or timeout_at > now())
        and task_id in (select task_id from tasks where status in (${sql.join([...ACTIVE_STATUSES])}))
      returning task_id
    )`;
}

/** Why a delivery was refused: the token is unknown, or its signal was delivered, timed out or ended. */
async function whyRefused(db: Kysely<Database>, token: string): Promise<SignalDelivery> {
  const row = await db
    .selectFrom('task_signals as s')
    .innerJoin('tasks as t', 't.task_id', 's.task_id')
    .select(['s.delivered_at', sql<boolean>`s.timeout_at <= now()`.as('timed_out'), 't.status'])
    .where('s.token_hash', '=', tokenHash(token))
    .executeTakeFirst();
  if (row === undefined) return 'unknown';
  if (row.delivered_at !== null) return 'already_delivered';
  if (row.timed_out) return 'timed_out';
  return 'task_ended';
}
