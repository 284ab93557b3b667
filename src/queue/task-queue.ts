import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { Statement } from '../db/statements.ts';

/** Enqueues a leg of a task's execution inside the caller's transaction. */
export interface TaskQueue {
  /**
   * `delayMs`: not before then (a retry after a crash, a durable sleep). `priority`: the run's place in
   * the queue (see queue/priority.ts); by default the queue works it out from the task's principal.
   */
  enqueueRun(
    executor: Kysely<Database>,
    taskId: string,
    opts?: { delayMs?: number; priority?: number },
  ): Promise<void>;
  /**
   * The statements that enqueue a new task's first run and wake a worker, to run inside the statement
   * that inserts the task (one round trip, where `enqueueRun` takes a transaction of four); each returns
   * a row when it did its part. Undefined when the queue cannot say (then `enqueueRun` it is).
   */
  firstRun?(taskId: string, priority: number): Promise<Statement[] | undefined>;
}
