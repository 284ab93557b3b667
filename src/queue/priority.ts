import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { activeTaskCount } from '../db/active-tasks.ts';

/**
 * Runs are fetched by priority, then in order of arrival: a run's priority is minus its principal's
 * rank, the number of that principal's active top-level tasks when the run was enqueued (counted up to
 * MAX_RANK). So the runs of a principal with few tasks go before a busy principal's backlog, whose runs
 * interleave with the others' as its count drops: a fair share weighted by what each principal holds.
 */
export const MAX_RANK = 100_000;

/**
 * A map's items rank this much behind their principal's own count: batch work yields to first runs and
 * resumes, and never counts as a light principal's (see LIGHT_RANK in the worker's fetch loop).
 */
export const MAP_ITEM_RANK = 64;

export function priorityOfRank(rank: number): number {
  return -Math.min(Math.max(0, Math.trunc(rank)), MAX_RANK);
}

/** The priority of a run of an existing task (a resume, a retry, a wake-up, a map item), from its principal's count now. */
export async function runPriority(executor: Kysely<Database>, taskId: string): Promise<number> {
  const { rows } = await sql<{ active: number; item: boolean }>`
    select (${activeTaskCount(sql.ref('t.principal'))}) as active,
      t.parent_task_id is not null as item
    from tasks t where t.task_id = ${taskId}`.execute(executor);
  const row = rows[0];
  if (row === undefined) return 0;
  return priorityOfRank(row.active + (row.item ? MAP_ITEM_RANK : 0));
}
