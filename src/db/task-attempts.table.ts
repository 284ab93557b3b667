import type { ColumnType, Selectable } from 'kysely';

/** One run leg of a task: written by the claim that started it. */
export interface TaskAttemptsTable {
  task_id: string;
  attempt: number;
  worker_id: string;
  claimed_at: ColumnType<Date, Date | string | undefined, Date | string>;
  lease_expires_at: ColumnType<Date, Date | string, Date | string>;
}

export type TaskAttemptRow = Selectable<TaskAttemptsTable>;
