import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';

/** Enqueues a leg of a task's execution inside the caller's transaction. */
export interface TaskQueue {
  /** `delaySeconds`: not before then (retries after a crash). */
  enqueueRun(executor: Kysely<Database>, taskId: string, opts?: { delaySeconds?: number }): Promise<void>;
}
