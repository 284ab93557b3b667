/** The first legs started per rate key (a sliding log): what a rate-limited claim counts. */
export interface TaskRateStartsTable {
  rate_key: string;
  started_at: Date;
  task_id: string;
}
