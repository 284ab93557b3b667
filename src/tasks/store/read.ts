import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { TASK_VIEW_COLUMNS, toTaskView, type TaskView } from './view.ts';

/** One indexed read by (taskId, principal); outstanding input requests folded in by a subquery. */
export async function getTaskView(
  db: Kysely<Database>,
  taskId: string,
  principal: string,
): Promise<TaskView | undefined> {
  const row = await db
    .selectFrom('tasks as t')
    .select(TASK_VIEW_COLUMNS.map((c) => `t.${c}` as const))
    .select(
      sql<unknown>`(select jsonb_object_agg(r.key, r.request order by r.created_at, r.key)
        from task_input_requests r where r.task_id = t.task_id and r.response is null)`.as('input_requests'),
    )
    .where('t.task_id', '=', taskId)
    .where('t.principal', '=', principal)
    .executeTakeFirst();
  return row === undefined ? undefined : toTaskView(row);
}

export async function taskExists(db: Kysely<Database>, taskId: string, principal: string): Promise<boolean> {
  const row = await db
    .selectFrom('tasks')
    .select('task_id')
    .where('task_id', '=', taskId)
    .where('principal', '=', principal)
    .executeTakeFirst();
  return row !== undefined;
}
