/** The first legs started per rate key (a sliding log): what a rate-limited claim counts. */
export interface TaskRateStartsTable {
  rate_key: string;
  started_at: Date;
  task_id: string;
  /** The waiting task this start hands its place to, one window after it. */
  successor_task_id: string | null;
}
