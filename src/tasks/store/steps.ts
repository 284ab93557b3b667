import type { Kysely } from 'kysely';
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
  const inserted = await db
    .insertInto('task_steps')
    .columns(['task_id', 'name', 'output', 'attempt'])
    .expression((eb) =>
      eb
        .selectFrom('tasks')
        .select([
          eb.val(taskId).as('task_id'),
          eb.val(name).as('name'),
          // `{}` for undefined, so that a replay sees undefined again, not null.
          eb.val(JSON.stringify(value === undefined ? {} : { value })).as('output'),
          eb.val(attempt).as('attempt'),
        ])
        .where('task_id', '=', taskId)
        .where('attempt', '=', attempt)
        .where('status', '=', 'working'),
    )
    .onConflict((oc) => oc.columns(['task_id', 'name']).doNothing())
    .returning('name')
    .executeTakeFirst();
  if (inserted !== undefined) return value;
  // Not inserted: either the fence failed (another attempt took over: stop), or this very attempt
  // recorded the step before (a repeated name): the recorded value wins.
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
