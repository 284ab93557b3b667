import type { ColumnType } from 'kysely';

export interface TaskStepStartsTable {
  task_id: string;
  name: string;
  /** Times the step's body has started (a start cut short by a crash included). */
  starts: number;
  last_started_at: ColumnType<Date, Date | string | undefined, Date | string>;
}
