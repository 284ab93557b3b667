import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { taskViews } from './read.ts';
import { toTaskView, type TaskView } from './view.ts';

/** A changed task as its watchers need it: whose it is, and what it looks like now. */
export interface ChangedTask {
  principal: string;
  view: TaskView;
}

/** Which of the changed tasks to read: those watched by id, and those created in a watched origin. */
export interface ChangedTaskFilter {
  taskIds: readonly string[];
  origins: readonly string[];
}

/**
 * The tasks among `changed` that someone watches, of every principal, in one query: the caller hands
 * each row only to watchers of the row's principal. A changed task nobody watches is not read.
 */
export async function readChangedTasks(
  db: Kysely<Database>,
  changed: readonly string[],
  watched: ChangedTaskFilter,
): Promise<ChangedTask[]> {
  if (changed.length === 0 || (watched.taskIds.length === 0 && watched.origins.length === 0)) return [];
  const rows = await taskViews(db)
    .select('t.principal')
    .where(sql<boolean>`t.task_id = any(${[...changed]}::text[])`)
    .where(
      sql<boolean>`(t.task_id = any(${[...watched.taskIds]}::text[]) or t.origin = any(${[...watched.origins]}::text[]))`,
    )
    .execute();
  return rows.map(({ principal, ...row }) => ({ principal, view: toTaskView(row) }));
}
