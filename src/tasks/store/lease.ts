import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { ClientCapabilities, JsonObject } from '../../core/wire.ts';
import type { TraceCarrier } from '../../core/tracing.ts';

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
}

/**
 * Starts a new attempt of a `working` task: bumps `attempt` (the fence every later write names) and
 * records the lease. Undefined when the task is not runnable (terminal, waiting for input, cancelled)
 * or another attempt still holds a live lease (a duplicate delivery must not steal a running task).
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
 * claimTask for a batch of deliveries, in one statement: the tasks that are runnable, by id. The rows
 * are locked in task id order, so two batches that share a task (a duplicate delivery) queue behind
 * each other instead of deadlocking.
 */
export async function claimTasks(
  db: Kysely<Database>,
  taskIds: readonly string[],
  workerId: string,
  leaseMs: number,
): Promise<Map<string, ClaimedTask>> {
  if (taskIds.length === 0) return new Map();
  // One statement: the claim, and each attempt's record (which worker, when, its lease) for the timeline.
  const rows = await db
    .with('target', (qb) =>
      qb
        .selectFrom('tasks')
        .select('task_id')
        .where(sql<boolean>`task_id = any(${[...taskIds]}::text[])`)
        .where('status', '=', 'working')
        .where('cancel_requested_at', 'is', null)
        .where((eb) => eb.or([eb('leased_by', 'is', null), eb('lease_expires_at', '<', sql<Date>`now()`)]))
        .orderBy('task_id')
        .forUpdate(),
    )
    .with('claimed', (qb) =>
      qb
        .updateTable('tasks')
        .from('target')
        .set((eb) => ({
          attempt: eb('attempt', '+', 1),
          leased_by: workerId,
          lease_expires_at: sql`now() + ${leaseMs} * interval '1 millisecond'`,
        }))
        .whereRef('tasks.task_id', '=', 'target.task_id')
        .returning([
          'tasks.task_id',
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
        ]),
    )
    .with('recorded', (qb) =>
      qb
        .insertInto('task_attempts')
        .columns(['task_id', 'attempt', 'worker_id', 'lease_expires_at'])
        .expression((eb) =>
          eb
            .selectFrom('claimed')
            .select([
              'claimed.task_id',
              'claimed.attempt',
              sql<string>`${workerId}::text`.as('worker_id'),
              'claimed.lease_expires_at',
            ]),
        ),
    )
    .selectFrom('claimed')
    .selectAll()
    .execute();
  return new Map(
    rows.map((row) => [
      row.task_id,
      {
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
      },
    ]),
  );
}

/**
 * Hands a task back (still `working`) so that another attempt can claim it, counting a crash when
 * `failed`; fenced by attempt. False when the attempt no longer held the task.
 */
export async function releaseTask(
  db: Kysely<Database>,
  taskId: string,
  attempt: number,
  { failed = false, delayMs = 0 }: { failed?: boolean; delayMs?: number } = {},
): Promise<boolean> {
  const row = await db
    .updateTable('tasks')
    .set((eb) => ({
      leased_by: null,
      lease_expires_at: claimDeadline(delayMs),
      ...(failed ? { failures: eb('failures', '+', 1) } : {}),
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
}

/**
 * One query for every attempt a worker runs: which ones must stop (cancel requested, task no longer
 * `working`, another attempt took over, or the lease was reclaimed). Held means this worker's lease, for
 * this attempt, on a working task.
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
    .select(['task_id', 'attempt', 'status', 'leased_by', 'cancel_requested_at'])
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
    return { taskId, held, cancelRequested: row?.cancel_requested_at != null };
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
 * cleared so that a new attempt can claim the task. The caller enqueues a run for each, in this transaction.
 */
export async function reclaimExpiredLeases(db: Kysely<Database>, limit: number): Promise<string[]> {
  const rows = await db
    .updateTable('tasks')
    .set({ leased_by: null, lease_expires_at: claimDeadline() })
    .where('task_id', 'in', (eb) =>
      eb
        .selectFrom('tasks')
        .select('task_id')
        .where('status', '=', 'working')
        .where('leased_by', 'is not', null)
        .where('lease_expires_at', '<', sql<Date>`now()`)
        .orderBy('lease_expires_at')
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .where('status', '=', 'working')
    .returning('task_id')
    .execute();
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
