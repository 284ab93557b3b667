import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { LeaseLostError } from './lease.ts';

/** Checkpointed step results of a task, by step name. */
export async function loadSteps(db: Kysely<Database>, taskId: string): Promise<Map<string, unknown>> {
  const rows = await db
    .selectFrom('task_steps')
    .select(['name', 'output'])
    .where('task_id', '=', taskId)
    .execute();
  return new Map(rows.map((r) => [r.name, (r.output as { value?: unknown }).value]));
}

export interface StepRecord {
  taskId: string;
  attempt: number;
  name: string;
  value: unknown;
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
): Promise<unknown> {
  const [saved] = await saveSteps(db, [{ taskId, attempt, name, value }]);
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
    // `{}` for undefined, so that a replay sees undefined again, not null.
    output: s.value === undefined ? {} : { value: s.value },
  }));
  const { rows: inserted } = await sql<{ task_id: string; attempt: number; name: string }>`
    insert into task_steps (task_id, name, output, attempt)
    select v.task_id, v.name, v.output, v.attempt
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      as v(task_id text, attempt int, name text, output jsonb)
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
