import type { ColumnType } from 'kysely';

/** A task's events (ctx.emit), numbered per task; see migrations/20261210000000_create_task_events.ts. */
export interface TaskEventsTable {
  task_id: string;
  /** 1, 2, 3… per task, no gaps. */
  seq: number;
  /** Where the handler emitted it (see worker/attempt-events.ts): a re-run skips what is written. */
  key: string;
  type: string;
  payload: ColumnType<unknown, string, string>;
  created_at: ColumnType<Date, Date | string | undefined, Date | string>;
}
