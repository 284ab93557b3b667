import type { ColumnType } from 'kysely';

export interface TaskStepFailuresTable {
  task_id: string;
  name: string;
  /** Failed attempts of the step so far. */
  failures: number;
  /** The last failure's message (at most 1,000 characters). */
  last_error: string;
  last_failed_at: ColumnType<Date, Date | string | undefined, Date | string>;
}
