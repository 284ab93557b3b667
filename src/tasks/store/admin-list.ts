// The operator's task list: every principal's tasks, filtered, newest first. Not scoped by principal:
// for the operator CLI and the dashboard, never for MCP clients.
import { sql, type ExpressionBuilder, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { ADMIN_COLUMNS, toAdminTask, type AdminRow, type AdminTask } from './admin-row.ts';

export interface AdminTaskFilter {
  /** Task statuses, and `paused` (a `working` task that is paused; `working` then means not paused). */
  status?: readonly string[] | undefined;
  tool?: string | undefined;
  principal?: string | undefined;
  /** Only tasks created at least this long ago. */
  olderThanMs?: number | undefined;
  /** Only tasks created at most this long ago. */
  newerThanMs?: number | undefined;
  limit?: number | undefined;
}

/** Tasks of every principal, newest first. */
export async function adminListTasks(
  db: Kysely<Database>,
  filter: AdminTaskFilter = {},
): Promise<AdminTask[]> {
  let query = db
    .selectFrom('tasks')
    .select(ADMIN_COLUMNS)
    .where('parent_task_id', 'is', null)
    .orderBy('created_at', 'desc')
    .orderBy('task_id', 'desc')
    .limit(Math.min(Math.max(filter.limit ?? 50, 1), 1000));
  if (filter.status !== undefined && filter.status.length > 0) query = query.where(statusIn(filter.status));
  if (filter.tool !== undefined) query = query.where('tool_name', '=', filter.tool);
  if (filter.principal !== undefined) query = query.where('principal', '=', filter.principal);
  if (filter.olderThanMs !== undefined)
    query = query.where(
      'created_at',
      '<=',
      sql<Date>`now() - ${filter.olderThanMs} * interval '1 millisecond'`,
    );
  if (filter.newerThanMs !== undefined)
    query = query.where(
      'created_at',
      '>=',
      sql<Date>`now() - ${filter.newerThanMs} * interval '1 millisecond'`,
    );
  const rows = await query.execute();
  return rows.map((r) => toAdminTask(r as AdminRow));
}

/** `status in (…)`, where `paused` is the paused `working` tasks and `working` the rest of them. */
function statusIn(statuses: readonly string[]) {
  const others = statuses.filter((s) => s !== 'working' && s !== 'paused');
  return (eb: ExpressionBuilder<Database, 'tasks'>) =>
    eb.or([
      ...(others.length > 0 ? [eb('status', 'in', others)] : []),
      ...(statuses.includes('working')
        ? [eb.and([eb('status', '=', 'working'), eb('paused_at', 'is', null)])]
        : []),
      ...(statuses.includes('paused')
        ? [eb.and([eb('status', '=', 'working'), eb('paused_at', 'is not', null)])]
        : []),
    ]);
}
