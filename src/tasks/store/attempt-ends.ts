import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../../db/database.ts';

/** How one attempt ended, for the operator's view: its outcome and, for a crash, what was thrown. */
export interface AttemptEnd {
  /** A leg outcome (completed, failed, crash_retry, paused, lease_lost, parked, …). */
  outcome: string;
  error?: { message: string; stack?: string | undefined } | undefined;
}

/** A stack excerpt is enough to find the throw; a whole one can be megabytes (and is in the log anyway). */
export const STACK_EXCERPT_LINES = 12;
const MESSAGE_CHARS = 2_000;

/** The error's message and stack excerpt as stored: bounded, and without what Postgres cannot hold (NUL). */
export function attemptError(error: Error): NonNullable<AttemptEnd['error']> {
  const clean = (text: string) => text.replace(/\u0000/g, '\\0');
  const stack = error.stack
    ?.split('\n')
    .slice(1, STACK_EXCERPT_LINES + 1)
    .join('\n');
  return {
    message: clean(`${error.name}: ${error.message}`.slice(0, MESSAGE_CHARS)),
    stack: stack === undefined || stack === '' ? undefined : clean(stack),
  };
}

/** The attempt row's columns for `end`. */
export function attemptEndColumns(end: AttemptEnd) {
  return {
    ended_at: sql<Date>`now()`,
    outcome: end.outcome,
    error_message: end.error?.message ?? null,
    error_stack: end.error?.stack ?? null,
  };
}

/**
 * The statement part (an UPDATE, for a CTE) that ends the open attempts of tasks whose lease lapsed, as
 * a worker that died leaves them: `lease_lost`, at the time the lease lapsed. `lapsed` selects each such
 * task's `task_id`, `attempt` (the one that held it: it and any older one still open end) and the
 * lapsed `lease_expires_at`. A worker that comes back finds its attempt ended; one that finishes the
 * task after all, before another attempt took it, writes its own outcome over this one.
 */
export function endLapsedAttempts(lapsed: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`update task_attempts a set ended_at = l.lease_expires_at, outcome = 'lease_lost'
    from (${lapsed}) l
    where a.task_id = l.task_id and a.attempt <= l.attempt and a.ended_at is null`;
}

/** Records how an attempt ended (its own row: written whether or not its fence still holds the task). */
export async function recordAttemptEnd(
  db: Kysely<Database>,
  taskId: string,
  attempt: number,
  end: AttemptEnd,
): Promise<void> {
  await db
    .updateTable('task_attempts')
    .set(attemptEndColumns(end))
    .where('task_id', '=', taskId)
    .where('attempt', '=', attempt)
    .where('ended_at', 'is', null)
    .execute();
}

/** How often a worker renews the marks of its stuck legs. */
export const STUCK_MARK_RENEW_MS = 10_000;
/** A mark not renewed for this long is stale: its worker died (or lost the database) while it was stuck. */
export const STUCK_MARK_STALE_MS = 60_000;

/** Whether an attempt row's stuck mark is live (renewed lately by its worker). */
export const isStuck = sql<boolean>`(stuck_since is not null and stuck_seen_at > now() - ${STUCK_MARK_STALE_MS} * interval '1 millisecond')`;

/** The stuck-mark columns of a leg found stuck (or found still stuck) now. */
export const stuckNow = {
  stuck_since: sql<Date>`coalesce(stuck_since, now())`,
  stuck_seen_at: sql<Date>`now()`,
};

/**
 * Marks an attempt's leg stuck (its handler still runs past its grace, holding its worker's slot) or, when
 * the handler returned, no longer stuck. Its own row only: whatever became of the task.
 */
export async function setLegStuck(
  db: Kysely<Database>,
  taskId: string,
  attempt: number,
  stuck: boolean,
): Promise<void> {
  await db
    .updateTable('task_attempts')
    .set(stuck ? stuckNow : { stuck_since: null, stuck_seen_at: null })
    .where('task_id', '=', taskId)
    .where('attempt', '=', attempt)
    .execute();
}

/** Renews the marks of legs still stuck (one statement for all of a worker's). */
export async function renewStuckMarks(
  db: Kysely<Database>,
  legs: readonly { taskId: string; attempt: number }[],
): Promise<void> {
  if (legs.length === 0) return;
  await sql`
    update task_attempts a set stuck_seen_at = now()
    from jsonb_to_recordset(${JSON.stringify(legs)}::jsonb) as l("taskId" text, attempt int)
    where a.task_id = l."taskId" and a.attempt = l.attempt and a.stuck_since is not null`.execute(db);
}
