/** A principal's token bucket for task creations (TASK_CREATE_RATE_PER_SECOND, TASK_CREATE_BURST). */
export interface PrincipalCreationBucketsTable {
  principal: string;
  /** Tokens left as of `refilled_at`; refilled at the rate up to the burst. */
  tokens: number;
  refilled_at: Date;
}
