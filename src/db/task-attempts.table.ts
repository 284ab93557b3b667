import type { ColumnType, Selectable } from 'kysely';

/** One run leg of a task: written by the claim that started it. */
export interface TaskAttemptsTable {
  task_id: string;
  attempt: number;
  worker_id: string;
  claimed_at: ColumnType<Date, Date | string | undefined, Date | string>;
  lease_expires_at: ColumnType<Date, Date | string, Date | string>;
  /** How the leg ended (a LegOutcome kind), when; null while it runs or when its worker died. */
  ended_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  outcome: ColumnType<string | null, string | null | undefined, string | null>;
  /** A crash's exception message and stack excerpt: for operators, never sent to a client. */
  error_message: ColumnType<string | null, string | null | undefined, string | null>;
  error_stack: ColumnType<string | null, string | null | undefined, string | null>;
  /**
   * Set while the leg's handler still runs past its cancel grace (CANCEL_GRACE_MS), holding its worker's
   * slot; cleared when it returns.
   */
  stuck_since: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** When its worker last said the leg is still stuck (a mark it stopped renewing is stale: see isStuck). */
  stuck_seen_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

export type TaskAttemptRow = Selectable<TaskAttemptsTable>;
