import { sql, type CompiledQuery, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { isWellFormedTaskId } from '../ids.ts';
import { TASK_VIEW_COLUMNS, toTaskView, type TaskView, type TaskViewRow } from './view.ts';

/** Tasks as views, with their outstanding input requests folded in by a subquery (`t` is the task). */
export function taskViews(db: Kysely<Database>) {
  return db
    .selectFrom('tasks as t')
    .select(TASK_VIEW_COLUMNS.map((c) => `t.${c}` as const))
    .select(
      sql<unknown>`(select jsonb_object_agg(r.key, r.request order by r.created_at, r.key)
        from task_input_requests r where r.task_id = t.task_id and r.response is null)`.as('input_requests'),
    );
}

/** Tasks of one principal, as views. */
function views(db: Kysely<Database>, principal: string) {
  return taskViews(db).where('t.principal', '=', principal);
}

/** tasks/get's query, compiled once: the SQL is the same for every call, only the parameters change. */
const PRINCIPAL = '\u0000principal';
const TASK_ID = '\u0000taskId';
let getQuery: { compiled: CompiledQuery<TaskViewRow>; order: Array<'principal' | 'taskId'> } | undefined;

/** One indexed read by (taskId, principal). */
export async function getTaskView(
  db: Kysely<Database>,
  taskId: string,
  principal: string,
): Promise<TaskView | undefined> {
  if (getQuery === undefined) {
    const compiled = views(db, PRINCIPAL).where('t.task_id', '=', TASK_ID).compile();
    const order = compiled.parameters.map((p) => (p === TASK_ID ? 'taskId' : 'principal'));
    getQuery = { compiled, order };
  }
  const { compiled, order } = getQuery;
  const parameters = order.map((p) => (p === 'taskId' ? taskId : principal));
  const { rows } = await db.executeQuery<TaskViewRow>({ ...compiled, parameters });
  return rows[0] === undefined ? undefined : toTaskView(rows[0]);
}

/** Several tasks of one principal in one query (subscriptions' periodic re-read). */
export async function getTaskViews(
  db: Kysely<Database>,
  taskIds: readonly string[],
  principal: string,
): Promise<TaskView[]> {
  if (taskIds.length === 0) return [];
  const rows = await views(db, principal)
    .where('t.task_id', 'in', [...taskIds])
    .execute();
  return rows.map(toTaskView);
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

/** The ids among `ids` naming tasks of `principal` (each once, in the given order). */
export async function ownedTaskIds(
  db: Kysely<Database>,
  ids: readonly string[],
  principal: string,
): Promise<string[]> {
  const wellFormed = [...new Set(ids)].filter(isWellFormedTaskId);
  if (wellFormed.length === 0) return [];
  const rows = await db
    .selectFrom('tasks')
    .select('task_id')
    .where('task_id', 'in', wellFormed)
    .where('principal', '=', principal)
    .execute();
  const found = new Set(rows.map((r) => r.task_id));
  return wellFormed.filter((id) => found.has(id));
}
