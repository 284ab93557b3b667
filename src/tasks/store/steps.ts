import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { LeaseLostError } from './lease.ts';

/** A task's recorded steps: their values by name, which step was called at each position, and failures. */
export interface StepHistory {
  values: Map<string, unknown>;
  positions: Map<number, string>;
  /** Failed attempts so far, by step name (a step's retry policy counts on from here). */
  failures: Map<string, number>;
  /**
   * The payloads of the task's signals delivered so far, by signal name (read with the steps that
   * created them): a wait for one of them needs no query of its own.
   */
  deliveredSignals: Map<string, unknown>;
}

/** The step under which a signal records its handle (ctx.createSignal): its name is the signal's own. */
export const signalStepName = (name: string) => `signal:${name}`;

/** A history with nothing recorded yet (a task's first attempt). */
export const emptyStepHistory = (): StepHistory => ({
  values: new Map(),
  positions: new Map(),
  failures: new Map(),
  deliveredSignals: new Map(),
});

/** Checkpointed step results of a task, by step name. */
export async function loadSteps(db: Kysely<Database>, taskId: string): Promise<Map<string, unknown>> {
  return (await loadStepHistory(db, taskId)).values;
}

export async function loadStepHistory(db: Kysely<Database>, taskId: string): Promise<StepHistory> {
  const [rows, failed] = await Promise.all([
    db
      .selectFrom('task_steps as s')
      // A signal's step and its delivery, in the same read.
      .leftJoin('task_signals as g', (join) =>
        join
          .onRef('g.task_id', '=', 's.task_id')
          .on(sql<boolean>`s.name = ${signalStepName('')} || g.name`)
          .on('g.delivered_at', 'is not', null),
      )
      .select(['s.name', 's.output', 's.position', 'g.name as signal', 'g.payload'])
      .where('s.task_id', '=', taskId)
      .execute(),
    db.selectFrom('task_step_failures').select(['name', 'failures']).where('task_id', '=', taskId).execute(),
  ]);
  return {
    values: new Map(rows.map((r) => [r.name, (r.output as { value?: unknown }).value])),
    positions: new Map(rows.flatMap((r) => (r.position === null ? [] : [[r.position, r.name] as const]))),
    failures: new Map(failed.map((f) => [f.name, f.failures])),
    deliveredSignals: new Map(
      rows.flatMap((r) =>
        r.signal === null ? [] : [[r.signal, (r.payload as { value?: unknown } | null)?.value] as const],
      ),
    ),
  };
}

/** Counts a step's failed attempt with its error (fenced by attempt); the count so far. */
export async function recordStepFailure(
  db: Kysely<Database>,
  { taskId, attempt, name, error }: { taskId: string; attempt: number; name: string; error: string },
): Promise<number> {
  const { rows } = await sql<{ failures: number }>`
    insert into task_step_failures (task_id, name, failures, last_error)
    select t.task_id, ${name}, 1, ${error.slice(0, 1_000)}
    from tasks t where t.task_id = ${taskId} and t.attempt = ${attempt} and t.status = 'working'
    on conflict (task_id, name) do update
      set failures = task_step_failures.failures + 1, last_error = excluded.last_error, last_failed_at = now()
    returning failures`.execute(db);
  if (rows.length === 0) throw new LeaseLostError(taskId, attempt);
  return rows[0]!.failures;
}

/** A step's start as counted: its number, or that its attempts are used up (and the last failure's message). */
export type StepStart = { started: number } | { exhausted: number; lastError: string | undefined };

/**
 * Counts a start of a step's body before it runs (fenced by attempt): its number, 1 for the first. A
 * step that has started `maxAttempts` times already is not counted again: exhausted, however its earlier
 * starts ended (failed, or their worker died mid-body).
 */
export async function startStepAttempt(
  db: Kysely<Database>,
  {
    taskId,
    attempt,
    name,
    maxAttempts,
  }: { taskId: string; attempt: number; name: string; maxAttempts: number },
): Promise<StepStart> {
  // (The plain reads see the rows as they were before this statement's insert.)
  const { rows } = await sql<{
    held: boolean;
    started: number | null;
    before: number | null;
    last_error: string | null;
  }>`
    with held as (
      select task_id from tasks where task_id = ${taskId} and attempt = ${attempt} and status = 'working'
    ), counted as (
      insert into task_step_starts (task_id, name, starts)
      select task_id, ${name}, 1 from held
      on conflict (task_id, name) do update
        set starts = task_step_starts.starts + 1, last_started_at = now()
        where task_step_starts.starts < ${maxAttempts}
      returning starts
    )
    select exists (select 1 from held) as held, (select starts from counted) as started,
      (select starts from task_step_starts where task_id = ${taskId} and name = ${name}) as before,
      (select last_error from task_step_failures where task_id = ${taskId} and name = ${name}) as last_error`.execute(
    db,
  );
  const row = rows[0]!;
  if (!row.held) throw new LeaseLostError(taskId, attempt);
  if (row.started !== null) return { started: row.started };
  return { exhausted: row.before ?? maxAttempts, lastError: row.last_error ?? undefined };
}

export interface StepRecord {
  taskId: string;
  attempt: number;
  name: string;
  value: unknown;
  /** The step's position in the handler's run (see the determinism guard in attempt-backend.ts). */
  position?: number | undefined;
}

/**
 * Checkpoints a step's result, only while `attempt` still holds the task. If the step was already
 * recorded, the recorded value wins (returned), so every replay sees one value per step.
 */
export async function saveStep(
  db: Kysely<Database>,
  taskId: string,
  attempt: number,
  name: string,
  value: unknown,
  position?: number,
): Promise<unknown> {
  const [saved] = await saveSteps(db, [{ taskId, attempt, name, value, position }]);
  return saved;
}

/**
 * saveStep for several steps in one INSERT (and one commit): the worker batches its concurrent legs'
 * checkpoints so. One promise per step, in order: its value, or LeaseLostError where its fence failed.
 */
export async function saveSteps(
  db: Kysely<Database>,
  steps: readonly StepRecord[],
): Promise<Promise<unknown>[]> {
  if (steps.length === 0) return [];
  const rows = steps.map((s) => ({
    task_id: s.taskId,
    attempt: s.attempt,
    name: s.name,
    position: s.position ?? null,
    // `{}` for undefined, so that a replay sees undefined again, not null.
    output: s.value === undefined ? {} : { value: s.value },
  }));
  const { rows: inserted } = await sql<{ task_id: string; attempt: number; name: string }>`
    insert into task_steps (task_id, name, output, attempt, position)
    select v.task_id, v.name, v.output, v.attempt, v.position
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      as v(task_id text, attempt int, name text, output jsonb, position int)
    join tasks t on t.task_id = v.task_id and t.attempt = v.attempt and t.status = 'working'
    on conflict (task_id, name) do nothing
    returning task_id, attempt, name`.execute(db);
  const fresh = new Set(inserted.map((r) => JSON.stringify([r.task_id, r.attempt, r.name])));
  return steps.map((s) => {
    // (A name repeated within the batch was inserted once: the first caller's value is the recorded one.)
    const key = JSON.stringify([s.taskId, s.attempt, s.name]);
    if (fresh.delete(key)) return Promise.resolve(s.value);
    const recorded = recordedStep(db, s.taskId, s.attempt, s.name);
    recorded.catch(() => {}); // its caller awaits it; not an unhandled rejection meanwhile
    return recorded;
  });
}

/**
 * A step that was not inserted: either the fence failed (another attempt took over: stop), or this
 * very attempt recorded the step before (a repeated name): the recorded value wins.
 */
async function recordedStep(
  db: Kysely<Database>,
  taskId: string,
  attempt: number,
  name: string,
): Promise<unknown> {
  const existing = await db
    .selectFrom('task_steps as s')
    .innerJoin('tasks as t', 't.task_id', 's.task_id')
    .select('s.output')
    .where('s.task_id', '=', taskId)
    .where('s.name', '=', name)
    .where('t.attempt', '=', attempt)
    .where('t.status', '=', 'working')
    .executeTakeFirst();
  if (existing === undefined) throw new LeaseLostError(taskId, attempt);
  return (existing.output as { value?: unknown }).value;
}
