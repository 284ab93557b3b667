import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/database.ts';

/** One item of a task's map, as the database has it: its status and each claim of it (worker, when). */
export interface MapItemRow {
  map_index: number;
  status: string;
  /** When the item finished (its last update). */
  finished: Date;
  claims: { worker: string; at: string }[];
}

/** The items of a task's maps, in index order, with every claim of each (task_attempts). */
export async function mapItemsOf(db: Kysely<Database>, taskId: string): Promise<MapItemRow[]> {
  const { rows } = await sql<MapItemRow>`
    select t.map_index, t.status, t.last_updated_at as finished,
      coalesce((select json_agg(json_build_object('worker', a.worker_id, 'at', a.claimed_at) order by a.claimed_at)
                from task_attempts a where a.task_id = t.task_id), '[]') as claims
    from tasks t where t.parent_task_id = ${taskId} order by t.map_index`.execute(db);
  return rows;
}

/**
 * The most items that were ever claimed and not yet finished at one instant (from their first claim
 * to their end), from the database's own timestamps: what a map's concurrency bounds.
 */
export function mostItemsAtOnce(items: readonly MapItemRow[]): number {
  const events = items
    .filter((i) => i.claims.length > 0)
    .flatMap((i) => [
      { at: new Date(i.claims[0]!.at).getTime(), d: 1 },
      { at: i.finished.getTime(), d: -1 },
    ]);
  // At one instant an end comes before a start: a turn handed on in one statement is not an overlap.
  events.sort((a, b) => a.at - b.at || a.d - b.d);
  let now = 0;
  let most = 0;
  for (const e of events) most = Math.max(most, (now += e.d));
  return most;
}
