import type { ColumnType, Selectable } from 'kysely';

export interface TaskInputRequestsTable {
  task_id: string;
  key: string;
  request: ColumnType<unknown, string, string>;
  response: ColumnType<unknown, string | null | undefined, string | null>;
  created_at: ColumnType<Date, Date | string | undefined, Date | string>;
  answered_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

export type TaskInputRequestRow = Selectable<TaskInputRequestsTable>;
