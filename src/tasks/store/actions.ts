// The audit trail of what operators did to tasks (resume, fork, cancel): who, when, what. Written in
// the transaction of the action itself, so an action is recorded exactly when it took effect.
import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';

/** Who acted: `cli:<user>@<host>`, `dashboard:<name>` (or `dashboard`), `client:<principal>`. */
export type Actor = string;

/** What was done to a task, by whom, when. */
export interface TaskAction {
  at: Date;
  actor: Actor;
  action: string;
  detail: Record<string, unknown>;
}

/** The longest actor kept (a dashboard name, a user@host). */
export const MAX_ACTOR_CHARS = 128;

/** Records `action` on each of `taskIds`, in the caller's transaction. */
export async function recordAction(
  db: Kysely<Database>,
  taskIds: readonly string[],
  actor: Actor,
  action: string,
  detail: Record<string, unknown> = {},
): Promise<void> {
  if (taskIds.length === 0) return;
  await db
    .insertInto('task_actions')
    .values(
      taskIds.map((taskId) => ({
        task_id: taskId,
        actor: actor.slice(0, MAX_ACTOR_CHARS),
        action,
        detail: JSON.stringify(detail),
      })),
    )
    .execute();
}

/** A task's actions, oldest first. */
export async function readActions(db: Kysely<Database>, taskId: string): Promise<TaskAction[]> {
  const rows = await db
    .selectFrom('task_actions')
    .select(['at', 'actor', 'action', 'detail'])
    .where('task_id', '=', taskId)
    .orderBy('at')
    .execute();
  return rows.map((r) => ({ at: r.at, actor: r.actor, action: r.action, detail: r.detail }));
}
