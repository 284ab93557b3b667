// One task with its history, for the operator (the CLI's `tasks show`, the dashboard's task page): any
// principal's task, never for MCP clients. One read per table, run at once.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { isWellFormedTaskId } from '../ids.ts';
import { redactArguments } from '../redact.ts';
import { readActions, type TaskAction } from './actions.ts';
import { ADMIN_COLUMNS, toAdminTask, type AdminTask } from './admin-row.ts';
import { listArtifacts } from './artifact-reads.ts';
import { isStuck } from './attempt-ends.ts';

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
  /** The task that started it (ctx.callTool, ctx.spawn), under which name; null for a client's task. */
  parent: { taskId: string; name: string; detached: boolean } | null;
  /** The child tasks it started, oldest first. */
  children: { taskId: string; name: string; toolName: string; status: string; detached: boolean }[];
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
  const row = await readTaskRow(db, taskId);
  if (row === undefined) return undefined;
  const [steps, stepFailures, inputRequests, attempts, artifacts, actions, children] = await Promise.all([
    readSteps(db, taskId),
    readStepFailures(db, taskId),
    readInputRequests(db, taskId),
    readAttempts(db, taskId),
    readArtifacts(db, taskId),
    readActions(db, taskId),
    readChildren(db, taskId),
  ]);
  return {
    task: toAdminTask(row),
    arguments: redactArguments(row.arguments, row.secret_arguments),
    steps,
    stepFailures,
    inputRequests,
    attempts,
    artifacts,
    actions,
    parent:
      row.spawned_by === null
        ? null
        : { taskId: row.spawned_by, name: row.spawn_name ?? '', detached: row.spawn_detached },
    children,
  };
}

/** The children a task started (at most MAX_CHILDREN_PER_TASK), oldest first. */
async function readChildren(db: Kysely<Database>, taskId: string): Promise<TaskHistory['children']> {
  const rows = await db
    .selectFrom('tasks')
    .select(['task_id', 'spawn_name', 'tool_name', 'status', 'spawn_detached'])
    .where('spawned_by', '=', taskId)
    .orderBy('created_at')
    .orderBy('task_id')
    .execute();
  return rows.map((r) => ({
    taskId: r.task_id,
    name: r.spawn_name ?? '',
    toolName: r.tool_name,
    status: r.status,
    detached: r.spawn_detached,
  }));
}

/** The task's row, with its arguments and which of them are secret. */
function readTaskRow(db: Kysely<Database>, taskId: string) {
  return db
    .selectFrom('tasks')
    .select([...ADMIN_COLUMNS, 'arguments', 'secret_arguments', 'spawned_by', 'spawn_name', 'spawn_detached'])
    .where('task_id', '=', taskId)
    .executeTakeFirst();
}

async function readSteps(db: Kysely<Database>, taskId: string): Promise<TaskHistory['steps']> {
  const steps = await db
    .selectFrom('task_steps')
    .select(['name', 'attempt', 'created_at'])
    .where('task_id', '=', taskId)
    .orderBy('created_at')
    .orderBy('name')
    .execute();
  return steps.map((s) => ({ name: s.name, attempt: s.attempt, at: s.created_at }));
}

async function readStepFailures(db: Kysely<Database>, taskId: string): Promise<TaskHistory['stepFailures']> {
  const failures = await db
    .selectFrom('task_step_failures')
    .select(['name', 'failures', 'last_error', 'last_failed_at'])
    .where('task_id', '=', taskId)
    .orderBy('last_failed_at')
    .execute();
  return failures.map((f) => ({
    name: f.name,
    failures: f.failures,
    lastError: f.last_error,
    at: f.last_failed_at,
  }));
}

async function readInputRequests(
  db: Kysely<Database>,
  taskId: string,
): Promise<TaskHistory['inputRequests']> {
  const inputs = await db
    .selectFrom('task_input_requests')
    .select(['key', 'request', 'created_at', 'answered_at'])
    .where('task_id', '=', taskId)
    .orderBy('created_at')
    .orderBy('key')
    .execute();
  return inputs.map((i) => ({
    key: i.key,
    method: methodOf(i.request),
    question: questionOf(i.request),
    askedAt: i.created_at,
    answeredAt: i.answered_at,
  }));
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

async function readAttempts(db: Kysely<Database>, taskId: string): Promise<TaskHistory['attempts']> {
  const attempts = await db
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
    .execute();
  return attempts.map((a) => ({
    attempt: a.attempt,
    workerId: a.worker_id,
    claimedAt: a.claimed_at,
    leaseExpiresAt: a.lease_expires_at,
    endedAt: a.ended_at,
    outcome: a.outcome,
    errorMessage: a.error_message,
    errorStack: a.error_stack,
    stuckSince: a.stuck_since,
  }));
}

/** The fields the history shows (not the artifact's ids or chunk size). */
async function readArtifacts(db: Kysely<Database>, taskId: string): Promise<TaskHistory['artifacts']> {
  const artifacts = await listArtifacts(db, taskId);
  return artifacts.map((a) => ({
    name: a.name,
    mimeType: a.mimeType,
    size: a.size,
    sha256: a.sha256,
    chunks: a.chunks,
    completedAt: a.completedAt,
  }));
}
