import type { ColumnType } from 'kysely';

/** A message the task's requestor sent with `tasks/steer` (SEP-2669 draft), for its handler to read. */
export interface TaskSteeringTable {
  task_id: string;
  /** Its number within the task, from 1, in the order sent (`tasks.steering_sent` hands it out). */
  seq: number;
  message: string;
  sent_at: ColumnType<Date, Date | string | undefined, Date | string>;
}
