import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { withStatements, type Statement } from '../../db/statements.ts';
import type { ClientCapabilities, JsonObject } from '../../core/wire.ts';
import type { TraceCarrier } from '../../core/tracing.ts';
import { claimDeadline, type ClaimedTask } from './lease.ts';
import type { Idempotency } from './idempotency.ts';
import { TASK_VIEW_COLUMNS, toTaskView, type TaskView } from './view.ts';

/**
 * What a transport asks of the tasks its requests create, stored with each task so that the core never
 * asks which protocol revision made it.
 */
export interface TaskTraits {
  /** A tool result with `isError` ends the task `failed` instead of `completed` (2025-11-25). */
  toolErrorFails?: boolean | undefined;
  /** An opaque tag of where the task was created (the 2025-11-25 revision: its session id); stored, shown, never interpreted. */
  origin?: string | undefined;
}

export interface NewTask extends TaskTraits {
  taskId: string;
  principal: string;
  toolName: string;
  arguments: JsonObject;
  prepared: unknown;
  clientCapabilities: ClientCapabilities;
  ttlMs: number | null;
  pollIntervalMs: number;
  /** The creating request's trace context: every run leg continues it. */
  traceContext?: TraceCarrier | undefined;
  /** The tool's concurrency cap for this task: at most `limit` legs with this key run at once. */
  concurrency?: { key: string; limit: number } | undefined;
  /** The tool's rate limit for this task: at most `limit` first legs with this key per `perMs`. */
  rateLimit?: { key: string; limit: number; perMs: number } | undefined;
  /** The tool's debounce: calls with this key join this task until it starts, `ms` after the last. */
  debounce?: { key: string; ms: number } | undefined;
  /** The tool's timeoutMs: the task fails past creation + this. */
  timeoutMs?: number | undefined;
  /** The create's idempotency key and what it was for (see store/idempotency.ts). */
  idempotency?: Idempotency | undefined;
  /** The tool's secret argument paths, kept for the operator views' redaction. */
  secretArguments?: readonly string[] | undefined;
  /** A child task: the task that spawned it, under which name, how deep (see store/children.ts). */
  spawn?: ChildOf | undefined;
}

/** Where a child task (ctx.callTool, ctx.spawn) comes from. */
export interface ChildOf {
  parentTaskId: string;
  name: string;
  /** 1 for a child of a client's task, 2 for a grandchild… */
  depth: number;
  /** Outlives its parent: not cancelled when the parent ends. */
  detached: boolean;
}

/** Inserts a task in `working`; run it in the transaction that also enqueues its job. */
export async function insertTask(db: Kysely<Database>, task: NewTask): Promise<TaskView> {
  return toTaskView(await insertQuery(db, task).executeTakeFirstOrThrow());
}

/**
 * Inserts a task in `working` and, in the same statement, `also` (its admission, first run's job and
 * wake-up): one round trip, committed when it returns. `kept`: the columns `also` keep (Statement.keep).
 */
export async function insertTaskWith(
  db: Kysely<Database>,
  task: NewTask,
  also: readonly Statement[],
): Promise<{ view: TaskView; kept: Record<string, unknown> }> {
  const { rows } = await db.executeQuery(withStatements(insertQuery(db, task).compile(), also));
  const [row] = rows;
  if (row === undefined) throw new Error(`inserting task ${task.taskId} returned no row`);
  return { view: toTaskView(row), kept: row };
}

/**
 * Inserts a task already claimed by `workerId` (its first attempt, leased; the attempt's record in the
 * same statement, and `also`), for a worker in this process to run at once: no job, no fetch, no
 * separate claim. If that worker dies, the lease lapses and the sweeper hands the task to another, as for
 * any attempt.
 */
export async function insertClaimedTask(
  db: Kysely<Database>,
  task: NewTask,
  claim: { workerId: string; leaseMs: number },
  also: readonly Statement[] = [],
): Promise<{ view: TaskView; claimed: ClaimedTask; kept: Record<string, unknown> }> {
  const insert = insertQuery(db, task, claim).compile();
  const recorded: Statement = {
    text: `insert into task_attempts (task_id, attempt, worker_id, lease_expires_at)
      select task_id, attempt, $1, lease_expires_at from main returning task_id`,
    values: [claim.workerId],
  };
  const { rows } = await db.executeQuery(withStatements(insert, [recorded, ...also]));
  const [row] = rows;
  if (row === undefined) throw new Error(`inserting task ${task.taskId} returned no row`);
  return {
    view: toTaskView(row),
    claimed: {
      taskId: task.taskId,
      principal: task.principal,
      toolName: task.toolName,
      arguments: task.arguments,
      prepared: task.prepared,
      clientCapabilities: task.clientCapabilities,
      attempt: row.attempt,
      failures: 0,
      createdAt: row.created_at,
      traceContext: task.traceContext ?? null,
    },
    kept: row,
  };
}

function insertQuery(db: Kysely<Database>, task: NewTask, claim?: { workerId: string; leaseMs: number }) {
  return db
    .insertInto('tasks')
    .values({
      task_id: task.taskId,
      principal: task.principal,
      tool_name: task.toolName,
      arguments: JSON.stringify(task.arguments),
      prepared: task.prepared === undefined ? null : JSON.stringify(task.prepared),
      client_capabilities: JSON.stringify(task.clientCapabilities),
      origin: task.origin ?? null,
      tool_error_fails: task.toolErrorFails === true,
      trace_context: task.traceContext === undefined ? null : JSON.stringify(task.traceContext),
      status: 'working',
      ttl_ms: task.ttlMs,
      poll_interval_ms: task.pollIntervalMs,
      concurrency_key: task.concurrency?.key ?? null,
      concurrency_limit: task.concurrency?.limit ?? null,
      rate_key: task.rateLimit?.key ?? null,
      rate_limit: task.rateLimit?.limit ?? null,
      rate_per_ms: task.rateLimit?.perMs ?? null,
      debounce_key: task.debounce?.key ?? null,
      run_after:
        task.debounce === undefined
          ? null
          : sql<Date>`now() + ${task.debounce.ms} * interval '1 millisecond'`,
      timeout_ms: task.timeoutMs ?? null,
      deadline_at:
        task.timeoutMs === undefined ? null : sql<Date>`now() + ${task.timeoutMs} * interval '1 millisecond'`,
      idempotency_key: task.idempotency?.key ?? null,
      idempotency_fingerprint: task.idempotency?.fingerprint ?? null,
      secret_arguments: task.secretArguments ?? null,
      ...(task.spawn !== undefined && {
        spawned_by: task.spawn.parentTaskId,
        spawn_name: task.spawn.name,
        spawn_depth: task.spawn.depth,
        spawn_detached: task.spawn.detached,
      }),
      ...(claim === undefined
        ? { lease_expires_at: claimDeadline(task.debounce?.ms) }
        : {
            attempt: 1,
            leased_by: claim.workerId,
            lease_expires_at: sql<Date>`now() + ${claim.leaseMs} * interval '1 millisecond'`,
          }),
      // now() is the transaction's start, the same instant created_at defaults to.
      expires_at: task.ttlMs === null ? null : sql<Date>`now() + ${task.ttlMs} * interval '1 millisecond'`,
    })
    .returning([...TASK_VIEW_COLUMNS, 'attempt', 'lease_expires_at']);
}
