import type { Kysely } from 'kysely';
import { fromKysely, PgBoss } from 'pg-boss';
import { z } from 'zod';
import type { Database } from '../db/database.ts';
import type { TaskQueue } from '../tasks/service.ts';

/** The queue of task execution legs: a first run, a resume after input, a retry. */
export const RUN_QUEUE = 'task-run';

export const RunJobSchema = z.object({ taskId: z.string() });
export type RunJob = z.infer<typeof RunJobSchema>;

export interface BossOptions {
  connectionString: string;
  /** Connections pg-boss's own pool may open. */
  max?: number;
  schema?: string;
  /** Maintenance (supervision, expiry of stuck jobs) runs in worker processes only. */
  supervise?: boolean;
}

/** A pg-boss instance with its own bounded pool; LISTEN/NOTIFY wake-ups on, cron scheduling off. */
export function createBoss({
  connectionString,
  max = 4,
  schema = 'pgboss',
  supervise = false,
}: BossOptions): PgBoss {
  return new PgBoss({
    connectionString,
    max,
    schema,
    supervise,
    schedule: false,
    migrate: true,
    useListenNotify: true,
    application_name: 'durable-mcp-tasks:pg-boss',
  });
}

export interface RunQueueOptions {
  retryLimit: number;
  retryDelaySeconds: number;
  expireInSeconds?: number;
}

/** Creates (or updates) the run queue; safe when several processes start at once. */
export async function ensureRunQueue(boss: PgBoss, opts: RunQueueOptions): Promise<void> {
  const options = {
    retryLimit: opts.retryLimit,
    retryDelay: opts.retryDelaySeconds,
    expireInSeconds: opts.expireInSeconds ?? 15 * 60,
    notify: true,
  };
  const existing = await boss.getQueue(RUN_QUEUE);
  if (existing === null) {
    try {
      await boss.createQueue(RUN_QUEUE, options);
      return;
    } catch (err) {
      // Lost a creation race with another instance: the queue exists now, so update it below.
      if ((await boss.getQueue(RUN_QUEUE)) === null) throw err;
    }
  }
  await boss.updateQueue(RUN_QUEUE, options);
}

/** The TaskQueue the task service uses: each enqueue is part of the caller's transaction. */
export class BossTaskQueue implements TaskQueue {
  readonly #boss: PgBoss;
  constructor(boss: PgBoss) {
    this.#boss = boss;
  }

  async enqueueRun(executor: Kysely<Database>, taskId: string): Promise<void> {
    const payload: RunJob = { taskId };
    await this.#boss.send(RUN_QUEUE, payload, { db: fromKysely(executor) });
  }
}
