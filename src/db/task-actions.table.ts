import type { ColumnType, Generated, Selectable } from 'kysely';

/** What an operator (or a client's cancel) did to a task: the audit trail shown in its timeline. */
export interface TaskActionsTable {
  action_id: Generated<string>;
  task_id: string;
  at: ColumnType<Date, Date | string | undefined, Date | string>;
  /** Who: `cli:<user>@<host>`, `dashboard:<name>`, or `client:<principal>`. */
  actor: string;
  /** What: resume, fork, forked, cancel. */
  action: string;
  detail: ColumnType<Record<string, unknown>, string | undefined, string>;
}

export type TaskActionRow = Selectable<TaskActionsTable>;
