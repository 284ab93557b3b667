// The operator's view of the store: every principal's tasks, filtered; one task with its history; cancel
// through the same store path as tasks/cancel; purge of finished tasks. (Resume: pause.ts; fork: fork.ts.) For the operator CLI (and the
// dashboard), never for MCP clients: nothing here is scoped by principal.
import { sql, type ExpressionBuilder, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { TaskNotFoundError } from '../errors.ts';
import { ACTIVE_STATUSES, TERMINAL_STATUSES } from '../status.ts';
import { isWellFormedTaskId } from '../ids.ts';
import { redactArguments } from '../redact.ts';
import { readActions, recordAction, type Actor, type TaskAction } from './actions.ts';
import { listArtifacts } from './artifact-reads.ts';
import { isStuck } from './attempt-ends.ts';
import { requestCancel } from './cancel.ts';
import { TASK_VIEW_COLUMNS, toTaskView, type TaskView } from './view.ts';

export interface AdminTask extends TaskView {
  principal: string;
  toolName: string;
  attempt: number;
  failures: number;
  leasedBy: string | null;
  leaseExpiresAt: Date | null;
  cancelRequestedAt: Date | null;
  expiresAt: Date | null;
  /** Set while the task is paused (still `working`): its attempts ran out under `onExhausted: 'pause'`. */
  pausedAt: Date | null;
}

export interface AdminTaskFilter {
  /** Task statuses, and `paused` (a `working` task that is paused; `working` then means not paused). */
  status?: readonly string[] | undefined;
  tool?: string | undefined;
  principal?: string | undefined;
  /** Only tasks created at least this long ago. */
  olderThanMs?: number | undefined;
  /** Only tasks created at most this long ago. */
  newerThanMs?: number | undefined;
  limit?: number | undefined;
}

const ADMIN_COLUMNS = [
  ...TASK_VIEW_COLUMNS,
  'principal',
  'tool_name',
  'attempt',
  'failures',
  'leased_by',
  'lease_expires_at',
  'cancel_requested_at',
  'expires_at',
  'paused_at',
] as const;

type AdminRow = Parameters<typeof toTaskView>[0] & {
  principal: string;
  tool_name: string;
  attempt: number;
  failures: number;
  leased_by: string | null;
  lease_expires_at: Date | null;
  cancel_requested_at: Date | null;
  expires_at: Date | null;
  paused_at: Date | null;
};

function toAdminTask(row: AdminRow): AdminTask {
  return {
    ...toTaskView(row),
    principal: row.principal,
    toolName: row.tool_name,
    attempt: row.attempt,
    failures: row.failures,
    leasedBy: row.leased_by,
    leaseExpiresAt: row.lease_expires_at,
    cancelRequestedAt: row.cancel_requested_at,
    expiresAt: row.expires_at,
    pausedAt: row.paused_at,
  };
}

/** Tasks of every principal, newest first. */
export async function adminListTasks(
  db: Kysely<Database>,
  filter: AdminTaskFilter = {},
): Promise<AdminTask[]> {
  let query = db
    .selectFrom('tasks')
    .select(ADMIN_COLUMNS)
    .where('parent_task_id', 'is', null)
    .orderBy('created_at', 'desc')
    .orderBy('task_id', 'desc')
    .limit(Math.min(Math.max(filter.limit ?? 50, 1), 1000));
  if (filter.status !== undefined && filter.status.length > 0) query = query.where(statusIn(filter.status));
  if (filter.tool !== undefined) query = query.where('tool_name', '=', filter.tool);
  if (filter.principal !== undefined) query = query.where('principal', '=', filter.principal);
  if (filter.olderThanMs !== undefined)
    query = query.where(
      'created_at',
      '<=',
      sql<Date>`now() - ${filter.olderThanMs} * interval '1 millisecond'`,
    );
  if (filter.newerThanMs !== undefined)
    query = query.where(
      'created_at',
      '>=',
      sql<Date>`now() - ${filter.newerThanMs} * interval '1 millisecond'`,
    );
  const rows = await query.execute();
  return rows.map((r) => toAdminTask(r as AdminRow));
}

/** `status in (…)`, where `paused` is the paused `working` tasks and `working` the rest of them. */
function statusIn(statuses: readonly string[]) {
  const others = statuses.filter((s) => s !== 'working' && s !== 'paused');
  return (eb: ExpressionBuilder<Database, 'tasks'>) =>
    eb.or([
      ...(others.length > 0 ? [eb('status', 'in', others)] : []),
      ...(statuses.includes('working')
        ? [eb.and([eb('status', '=', 'working'), eb('paused_at', 'is', null)])]
        : []),
      ...(statuses.includes('paused')
        ? [eb.and([eb('status', '=', 'working'), eb('paused_at', 'is not', null)])]
        : []),
    ]);
}

function methodOf(request: unknown): string {
  const method = (request as { method?: unknown } | null)?.method;
  return typeof method === 'string' ? method : 'unknown';
}

/** What an input request asks, in words: an elicitation's message (null for a request without one). */
function questionOf(request: unknown): string | null {
  const message = (request as { params?: { message?: unknown } } | null)?.params?.message;
  return typeof message === 'string' ? message : null;
}

export interface TaskHistory {
  task: AdminTask;
  /** Its arguments, with the fields its tool marked secret shown as "[redacted]". */
  arguments: unknown;
  /** Durable steps in the order they completed. */
  steps: { name: string; attempt: number; at: Date }[];
  /** Steps that failed: how often, and the last error's message (step retry policies count these). */
  stepFailures: { name: string; failures: number; lastError: string; at: Date }[];
  /** Input requests: what each asks, whether and when it was answered, never the answer. */
  inputRequests: {
    key: string;
    method: string;
    question: string | null;
    askedAt: Date;
    answeredAt: Date | null;
  }[];
  /**
   * Each run leg: the worker that claimed it, when, the lease it took, and how it ended (null while it
   * runs, or when its worker died): its outcome, and for a crash the exception's message and a stack
   * excerpt (for operators: never sent to a client).
   */
  attempts: {
    attempt: number;
    workerId: string;
    claimedAt: Date;
    leaseExpiresAt: Date;
    endedAt: Date | null;
    outcome: string | null;
    errorMessage: string | null;
    errorStack: string | null;
    /**
     * Since when its handler has run past its cancel grace, holding a slot; null once it returned (or when
     * its worker stopped saying so: it died).
     */
    stuckSince: Date | null;
  }[];
  /** What operators (and a client's cancel, when an operator's is not recorded) did to it, oldest first. */
  actions: TaskAction[];
  /** Its complete artifacts, by name (one being written is not listed until it completes). */
  artifacts: {
    name: string;
    mimeType: string;
    size: number;
    sha256: string;
    chunks: number;
    completedAt: Date;
  }[];
}

/** One task with its durable steps, input requests and artifacts; undefined when there is no such task. */
export async function adminGetTask(db: Kysely<Database>, taskId: string): Promise<TaskHistory | undefined> {
  if (!isWellFormedTaskId(taskId)) return undefined; // (a NUL or a 10 kB id names no task)
  const row = await db
    .selectFrom('tasks')
    .select([...ADMIN_COLUMNS, 'arguments', 'secret_arguments'])
    .where('task_id', '=', taskId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  const [steps, failures, inputs, attempts, artifacts, actions] = await Promise.all([
    db
      .selectFrom('task_steps')
      .select(['name', 'attempt', 'created_at'])
      .where('task_id', '=', taskId)
      .orderBy('created_at')
      .orderBy('name')
      .execute(),
    db
      .selectFrom('task_step_failures')
      .select(['name', 'failures', 'last_error', 'last_failed_at'])
      .where('task_id', '=', taskId)
      .orderBy('last_failed_at')
      .execute(),
    db
      .selectFrom('task_input_requests')
      .select(['key', 'request', 'created_at', 'answered_at'])
      .where('task_id', '=', taskId)
      .orderBy('created_at')
      .orderBy('key')
      .execute(),
    db
      .selectFrom('task_attempts')
      .select([
        'attempt',
        'worker_id',
        'claimed_at',
        'lease_expires_at',
        'ended_at',
        'outcome',
        'error_message',
        'error_stack',
        sql<Date | null>`case when ${isStuck} then stuck_since end`.as('stuck_since'),
      ])
      .where('task_id', '=', taskId)
      .orderBy('attempt')
      .execute(),
    listArtifacts(db, taskId),
    readActions(db, taskId),
  ]);
  return {
    task: toAdminTask(row),
    arguments: redactArguments(row.arguments, row.secret_arguments),
    steps: steps.map((s) => ({ name: s.name, attempt: s.attempt, at: s.created_at })),
    stepFailures: failures.map((f) => ({
      name: f.name,
      failures: f.failures,
      lastError: f.last_error,
      at: f.last_failed_at,
    })),
    inputRequests: inputs.map((i) => ({
      key: i.key,
      method: methodOf(i.request),
      question: questionOf(i.request),
      askedAt: i.created_at,
      answeredAt: i.answered_at,
    })),
    attempts: attempts.map((a) => ({
      attempt: a.attempt,
      workerId: a.worker_id,
      claimedAt: a.claimed_at,
      leaseExpiresAt: a.lease_expires_at,
      endedAt: a.ended_at,
      outcome: a.outcome,
      errorMessage: a.error_message,
      errorStack: a.error_stack,
      stuckSince: a.stuck_since,
    })),
    artifacts: artifacts.map((a) => ({
      name: a.name,
      mimeType: a.mimeType,
      size: a.size,
      sha256: a.sha256,
      chunks: a.chunks,
      completedAt: a.completedAt,
    })),
    actions,
  };
}

/** One minute of activity: tasks created and finished in it, and tasks in flight at its end. */
export interface ActivityMinute {
  minute: Date;
  created: number;
  finished: number;
  inFlight: number;
}

/**
 * The last `minutes` minutes, oldest first: created and finished per minute (throughput), and how many tasks
 * were working or waiting for input at the end of each (the backlog). One scan of the tasks that were
 * active in the window, grouped by minute; the curve is computed from the groups.
 */
export async function adminActivity(db: Kysely<Database>, minutes = 60): Promise<ActivityMinute[]> {
  const span = Math.min(Math.max(Math.trunc(minutes), 1), 24 * 60);
  const { rows } = await sql<{ now: Date; c: Date; f: Date | null; n: number }>`
    with bounds as (select date_trunc('minute', now()) - ${span - 1} * interval '1 minute' as start)
    select date_trunc('minute', now()) as now,
           date_trunc('minute', t.created_at) as c,
           case when t.status in ('completed', 'failed', 'cancelled')
                then date_trunc('minute', t.last_updated_at) end as f,
           count(*)::int as n
      from tasks t, bounds b
     where t.parent_task_id is null -- (a map's items are their parent's work)
       and (t.created_at >= b.start
        or t.status in ('working', 'input_required')
        or t.last_updated_at >= b.start)
     group by 1, 2, 3`.execute(db);
  const MINUTE = 60_000;
  const end = (rows[0]?.now ?? new Date(Math.floor(Date.now() / MINUTE) * MINUTE)).getTime();
  const start = end - (span - 1) * MINUTE;
  const series: ActivityMinute[] = Array.from({ length: span }, (_, i) => ({
    minute: new Date(start + i * MINUTE),
    created: 0,
    finished: 0,
    inFlight: 0,
  }));
  const index = (t: Date) => Math.round((t.getTime() - start) / MINUTE);
  for (const row of rows) {
    const c = index(row.c);
    const f = row.f === null ? undefined : index(row.f);
    if (c >= 0 && c < span) series[c]!.created += row.n;
    if (f !== undefined && f >= 0 && f < span) series[f]!.finished += row.n;
    // In flight at the end of minute i: created in or before it, not finished by then.
    for (let i = Math.max(c, 0); i < span && (f === undefined || i < f); i++) series[i]!.inFlight += row.n;
  }
  return series;
}

/**
 * Cancels as the task's owner would with tasks/cancel (the same store function, in a transaction):
 * at once when no worker holds it, otherwise the running handler sees the flag. Returns the status after.
 */
export async function adminCancelTask(
  db: Kysely<Database>,
  taskId: string,
  actor: Actor,
): Promise<{ status: string; cancelledNow: boolean }> {
  if (!isWellFormedTaskId(taskId)) throw new TaskNotFoundError(taskId.slice(0, 64));
  return db.transaction().execute(async (trx) => {
    const owner = await trx
      .selectFrom('tasks')
      .select('principal')
      .where('task_id', '=', taskId)
      .executeTakeFirst();
    if (owner === undefined) throw new TaskNotFoundError(taskId);
    const { requested, cancelledNow } = await requestCancel(trx, taskId, owner.principal);
    // (A finished task's cancel changes nothing: nothing to audit.)
    if (requested) await recordAction(trx, [taskId], actor, 'cancel');
    const after = await trx
      .selectFrom('tasks')
      .select('status')
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
    return { status: after.status, cancelledNow };
  });
}

/**
 * Deletes finished tasks (completed, failed, cancelled) last updated at least `olderThanMs` ago, with their
 * steps and input requests. Active tasks are never touched. `dryRun` counts instead.
 */
export async function adminPurgeTasks(
  db: Kysely<Database>,
  {
    olderThanMs,
    status,
    dryRun = false,
  }: { olderThanMs: number; status?: readonly string[]; dryRun?: boolean },
): Promise<number> {
  const statuses = (status ?? TERMINAL_STATUSES).filter((s) =>
    (TERMINAL_STATUSES as readonly string[]).includes(s),
  );
  if (statuses.length === 0) return 0;
  const cutoff = sql<Date>`now() - ${olderThanMs} * interval '1 millisecond'`;
  if (dryRun) {
    const row = await db
      .selectFrom('tasks')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('status', 'in', statuses)
      .where('last_updated_at', '<=', cutoff)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }
  const deleted = await db
    .deleteFrom('tasks')
    .where('status', 'in', statuses)
    .where('status', 'not in', ACTIVE_STATUSES)
    .where('last_updated_at', '<=', cutoff)
    .executeTakeFirst();
  return Number(deleted.numDeletedRows);
}
