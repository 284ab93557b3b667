import type { ColumnType, Selectable } from 'kysely';

export interface TaskStepsTable {
  task_id: string;
  name: string;
  /** `{ "value": <the step's return value> }`, so that `undefined` and `null` survive the round trip. */
  output: ColumnType<unknown, string, string>;
  attempt: number;
  /** Where the step was called in the handler's run (0-based, call order); null for older rows. */
  position: ColumnType<number | null, number | null | undefined, number | null>;
  created_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export type TaskStepRow = Selectable<TaskStepsTable>;
