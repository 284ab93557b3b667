// A tool's debounce (`defineTool({ debounce })`): a call whose key matches a task of the same principal
// that has not started yet joins it (its arguments replace the task's, its start moves to `ms` after this
// call) instead of creating another. Under the key's advisory lock, so that the calls of a burst see each
// other's tasks; the join is a guarded UPDATE on a task no attempt has claimed, so a task whose first
// leg started meanwhile is never changed (the call then starts a new burst).
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { claimDeadline } from './lease.ts';
import type { NewTask } from './create.ts';
import { TASK_VIEW_COLUMNS, toTaskView, type TaskView } from './view.ts';

/** Serializes a principal's calls with the same debounce key (across processes), until commit. */
export async function lockDebounceKey(trx: Kysely<Database>, principal: string, key: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`debounce:${principal}:${key}`}, 0))`.execute(
    trx,
  );
}

/**
 * Joins the principal's pending task with `task`'s debounce key, if any: its arguments (and prepared
 * value and client capabilities) become `task`'s and it starts no sooner than `debounce.ms` from now.
 * Call under lockDebounceKey. The joined task's view, or undefined when there is none to join.
 */
export async function joinDebouncedTask(
  trx: Kysely<Database>,
  task: Omit<NewTask, 'taskId'> & { debounce: { key: string; ms: number } },
): Promise<TaskView | undefined> {
  const { key, ms } = task.debounce;
  const row = await trx
    .updateTable('tasks')
    .set({
      arguments: JSON.stringify(task.arguments),
      prepared: task.prepared === undefined ? null : JSON.stringify(task.prepared),
      client_capabilities: JSON.stringify(task.clientCapabilities),
      run_after: sql<Date>`now() + ${ms} * interval '1 millisecond'`,
      lease_expires_at: claimDeadline(ms),
      last_updated_at: sql`now()`,
    })
    .where('task_id', '=', (eb) =>
      eb
        .selectFrom('tasks')
        .select('task_id')
        .where('principal', '=', task.principal)
        .where('debounce_key', '=', key)
        .where('status', '=', 'working')
        .where('attempt', '=', 0)
        .orderBy('created_at', 'desc')
        .limit(1),
    )
    // Guarded: never a task an attempt claimed (attempt > 0), or one cancelled while it waited.
    .where('status', '=', 'working')
    .where('attempt', '=', 0)
    .where('leased_by', 'is', null)
    .where('cancel_requested_at', 'is', null)
    .returning(TASK_VIEW_COLUMNS)
    .executeTakeFirst();
  return row === undefined ? undefined : toTaskView(row);
}
