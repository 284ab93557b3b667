import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { ClientCapabilities, JsonObject } from '../../core/wire.ts';
import type { TraceCarrier } from '../../core/tracing.ts';
import { endLapsedAttempts } from './attempt-ends.ts';

/**
 * How long a queued run may wait for a worker to claim it before it counts as stuck (its delivery was
 * fetched by a worker that died before claiming). While no worker holds a task, `lease_expires_at` is
 * this claim deadline; an idle worker redelivers runs past it.
 */
export const REDELIVERY_MS = 10_000;

export function claimDeadline(delayMs = 0) {
  return sql<Date>`now() + ${REDELIVERY_MS + delayMs} * interval '1 millisecond'`;
}

/** The attempt's fence no longer holds: another attempt took over, or the task left `working`. */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
  constructor(
    readonly taskId: string,
    readonly attempt: number,
  ) {
    super(`Task ${taskId} is no longer held by attempt ${attempt}`);
  }
}

export interface ClaimedTask {
  taskId: string;
  principal: string;
  toolName: string;
  arguments: JsonObject;
  prepared: unknown;
  clientCapabilities: ClientCapabilities;
  attempt: number;
  /** Handler crashes before this attempt. */
  failures: number;
  createdAt: Date;
  /** The creating request's trace context, if it was traced. */
  traceContext: TraceCarrier | null;
  /** Set for a map item (ctx.map): its leg replays the parent's handler and runs this item only. */
  mapItem?: MapItemRef | undefined;
  /** The tool's concurrency key for this task, when it has one: its leg's end lets the next one run. */
  concurrencyKey?: string | undefined;
}

/** A map item: the task whose handler called `ctx.map`, the map's name, the item's index. */
export interface MapItemRef {
  parentTaskId: string;
  mapName: string;
  index: number;
}

/** The columns a claim returns, by name (see toClaimedTask). */
export const CLAIMED_COLUMNS = [
  'task_id',
  'principal',
  'tool_name',
  'arguments',
  'prepared',
  'client_capabilities',
  'attempt',
  'failures',
  'created_at',
  'trace_context',
  'lease_expires_at',
  'parent_task_id',
  'map_name',
  'map_index',
  'concurrency_key',
] as const;

export interface ClaimedRow {
  task_id: string;
  principal: string;
  tool_name: string;
  arguments: unknown;
  prepared: unknown;
  client_capabilities: unknown;
  attempt: number;
  failures: number;
  created_at: Date;
  trace_context: unknown;
  parent_task_id: string | null;
  map_name: string | null;
  map_index: number | null;
  concurrency_key: string | null;
}

export function toClaimedTask(row: ClaimedRow): ClaimedTask {
  return {
    taskId: row.task_id,
    principal: row.principal,
    toolName: row.tool_name,
    arguments: row.arguments as JsonObject,
    prepared: row.prepared ?? undefined,
    clientCapabilities: row.client_capabilities as ClientCapabilities,
    attempt: row.attempt,
    failures: row.failures,
    createdAt: row.created_at,
    traceContext: (row.trace_context as TraceCarrier | null | undefined) ?? null,
    ...(row.parent_task_id !== null && {
      mapItem: { parentTaskId: row.parent_task_id, mapName: row.map_name!, index: row.map_index! },
    }),
    ...(row.concurrency_key !== null && { concurrencyKey: row.concurrency_key }),
  };
}

/** A claimed row read back as JSON (`row_to_json` of a claim's CTE): its timestamp is text there. */
export type ClaimedJson = Omit<ClaimedRow, 'created_at'> & { created_at: string };

export function claimedFromJson(row: ClaimedJson): ClaimedTask {
  return toClaimedTask({ ...row, created_at: new Date(row.created_at) });
}

/**
 * The claim, as the CTEs of a statement (`target`, `claimed`, `recorded`, `taken_over`; the statement
 * selects from `claimed`): of the tasks whose ids `ids` selects, those that are runnable get a new
 * attempt leased to `workerId`, and each attempt's record (which worker, when, its lease) for the
 * timeline (tasks with a concurrency key only when `keyed`: the caller counts their key's legs first).
 * A task taken over from a worker whose lease lapsed ends that worker's attempt (`lease_lost`, when it
 * lapsed); one released by its worker had its attempt ended by it. The rows are locked in task id
 * order, so two claims that share a task (a duplicate delivery) queue behind each other instead of
 * deadlocking. Statements that do more than claim (a signal's delivery) put their own CTEs before these.
 */
export function claimCtes(
  ids: RawBuilder<unknown>,
  workerId: string,
  leaseMs: number,
  { keyed = false }: { keyed?: boolean } = {},
): RawBuilder<unknown> {
  const columns = sql.join(CLAIMED_COLUMNS.map((c) => sql.raw(`t.${c}`)));
  // A task with a concurrency key, or a first leg with a rate limit, is claimed only where its key's legs
  // or starts are counted under a lock (claim.ts: claimGatedTask), never in passing.
  const keyFilter = keyed ? sql`` : sql`and concurrency_key is null and (rate_key is null or attempt > 0)`;
  return sql`target as (
      select task_id, attempt, leased_by, lease_expires_at from tasks
      where task_id in (${ids}) and status = 'working' and cancel_requested_at is null and paused_at is null
        and (leased_by is null or lease_expires_at < now()) ${keyFilter}
        -- Not before a debounced task's burst is over; never past the task's timeoutMs (timeout.ts).
        and (run_after is null or run_after <= now()) and (deadline_at is null or deadline_at > now())
      order by task_id
      for update
    ), claimed as (
      update tasks t set attempt = t.attempt + 1, leased_by = ${workerId},
        lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
      from target where t.task_id = target.task_id
      returning ${columns}
    ), recorded as (
      insert into task_attempts (task_id, attempt, worker_id, lease_expires_at)
      select task_id, attempt, ${workerId}::text, lease_expires_at from claimed
    ), taken_over as (
      ${endLapsedAttempts(sql`select task_id, attempt, lease_expires_at from target where leased_by is not null`)}
    )`;
}

/**
 * Hands a task back (still `working`) so that another attempt can claim it, counting a crash when
 * `failed`, with a new `statusMessage` when given (a durable sleep says until when); fenced by
 * attempt. False when the attempt no longer held the task.
 */
export async function releaseTask(
  db: Kysely<Database>,
  taskId: string,
  attempt: number,
  {
    failed = false,
    delayMs = 0,
    statusMessage,
  }: { failed?: boolean; delayMs?: number; statusMessage?: string } = {},
): Promise<boolean> {
  const row = await db
    .updateTable('tasks')
    .set((eb) => ({
      leased_by: null,
      lease_expires_at: claimDeadline(delayMs),
      ...(failed ? { failures: eb('failures', '+', 1) } : {}),
      ...(statusMessage === undefined ? {} : { status_message: statusMessage, last_updated_at: sql`now()` }),
    }))
    .where('task_id', '=', taskId)
    .where('attempt', '=', attempt)
    .where('status', '=', 'working')
    .returning('task_id')
    .executeTakeFirst();
  return row !== undefined;
}

export interface LeaseState {
  taskId: string;
  /** The attempt still holds the task and no cancel was asked for. */
  held: boolean;
  cancelRequested: boolean;
  /** Its owner asked for a pause (`tasks/pause`): the attempt pauses at its next checkpoint. */
  pauseRequested: boolean;
}

/**
 * One query for every attempt a worker runs: which ones must stop (cancel requested, task no longer
 * `working`, another attempt took over, or the lease was reclaimed), and which must pause at their next
 * checkpoint. Held means this worker's lease, for this attempt, on a working task.
 */
export async function checkLeases(
  db: Kysely<Database>,
  workerId: string,
  attempts: ReadonlyMap<string, number>,
): Promise<LeaseState[]> {
  if (attempts.size === 0) return [];
  const ids = [...attempts.keys()];
  const rows = await db
    .selectFrom('tasks')
    .select(['task_id', 'attempt', 'status', 'leased_by', 'cancel_requested_at', 'pause_requested_at'])
    .where('task_id', 'in', ids)
    .execute();
  const byId = new Map(rows.map((r) => [r.task_id, r]));
  return ids.map((taskId) => {
    const row = byId.get(taskId);
    const held =
      row !== undefined &&
      row.attempt === attempts.get(taskId) &&
      row.status === 'working' &&
      row.leased_by === workerId;
    return {
      taskId,
      held,
      cancelRequested: row?.cancel_requested_at != null,
      pauseRequested: row?.pause_requested_at != null,
    };
  });
}

/**
 * Extends this worker's leases, each fenced by its attempt: a lease another attempt holds, or one the
 * sweeper took back, is never touched. Returns the task ids whose lease was extended.
 */
export async function renewLeases(
  db: Kysely<Database>,
  workerId: string,
  attempts: ReadonlyMap<string, number>,
  leaseMs: number,
): Promise<Set<string>> {
  if (attempts.size === 0) return new Set();
  const pairs = [...attempts].map(([taskId, attempt]) => sql`(${taskId}, ${attempt})`);
  const rows = await db
    .updateTable('tasks')
    .set({ lease_expires_at: sql`now() + ${leaseMs} * interval '1 millisecond'` })
    .where(sql<boolean>`(task_id, attempt) in (${sql.join(pairs)})`)
    .where('leased_by', '=', workerId)
    .where('status', '=', 'working')
    .returning('task_id')
    .execute();
  return new Set(rows.map((r) => r.task_id));
}

/**
 * Takes back up to `limit` tasks whose attempt's lease lapsed (its worker died or hung): the lease is
 * cleared so that a new attempt can claim the task, and the attempt ends `lease_lost` at the time it
 * lapsed (in the same statement: once cleared, the lapse time is gone). The caller enqueues a run for
 * each, in this transaction.
 */
export async function reclaimExpiredLeases(db: Kysely<Database>, limit: number): Promise<string[]> {
  const { rows } = await sql<{ task_id: string }>`
    with lapsed as (
      select task_id, attempt, lease_expires_at from tasks
      where status = 'working' and leased_by is not null and lease_expires_at < now()
      order by lease_expires_at
      limit ${limit}
      for update skip locked
    ), reclaimed as (
      update tasks t set leased_by = null, lease_expires_at = ${claimDeadline()}
      from lapsed where t.task_id = lapsed.task_id
      returning t.task_id
    ), ended as (
      ${endLapsedAttempts(sql`select * from lapsed`)}
    )
    select task_id from reclaimed`.execute(db);
  return rows.map((r) => r.task_id);
}

/**
 * Queued runs past their claim deadline (see REDELIVERY_MS): their delivery is presumed lost, so the
 * caller enqueues them again, in this transaction. Only idle workers call it: with a backlog, a queued
 * run simply waits its turn. A duplicate delivery is harmless (a claim happens once).
 */
export async function redeliverStuckRuns(db: Kysely<Database>, limit: number): Promise<string[]> {
  const rows = await db
    .updateTable('tasks')
    .set({ lease_expires_at: claimDeadline() })
    .where('task_id', 'in', (eb) =>
      eb
        .selectFrom('tasks')
        .select('task_id')
        .where('status', '=', 'working')
        .where('leased_by', 'is', null)
        .where('paused_at', 'is', null)
        .where('lease_expires_at', '<', sql<Date>`now()`)
        .orderBy('lease_expires_at')
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .where('leased_by', 'is', null)
    .returning('task_id')
    .execute();
  return rows.map((r) => r.task_id);
}
