import { sql, type Kysely } from 'kysely';
import { fromKysely, PgBoss } from 'pg-boss';
import { z } from 'zod';
import {
  GuardedClient,
  PreparingClient,
  connectionOptions,
  type Database,
  type ConnectionTimeouts,
} from '../db/database.ts';
import { embeddable, type Statement } from '../db/statements.ts';
import { CHANNELS } from '../events/change-feed.ts';
import { runPriority } from './priority.ts';
import type { TaskQueue } from './task-queue.ts';

/**
 * The queue of task execution legs: a first run, a resume after input, a retry, a hand-off. A job is
 * only the durable message "run task X"; the worker acknowledges it as soon as it has claimed the task,
 * and from then on the task's lease (not the job) tracks the run.
 */
export const RUN_QUEUE = 'task-run';

export const RunJobSchema = z.object({ taskId: z.string() });
export type RunJob = z.infer<typeof RunJobSchema>;

/**
 * How long a finished run job is kept (s). A job is only "run task X": the task's own rows keep its
 * history, so a finished job is kept just long enough to read when debugging. pg-boss's default (7 days)
 * kept 8.6M rows a day at 100 tasks/s, far past the ~1M its maintainer advises for its job table.
 */
export const DEFAULT_QUEUE_JOB_RETENTION_S = 300;
/** How often pg-boss's maintenance deletes jobs past their retention (s); its default is once a day. */
export const DEFAULT_QUEUE_MAINTENANCE_INTERVAL_S = 60;

export interface BossOptions {
  connectionString: string;
  /** Connections pg-boss's own pool may open. */
  max?: number;
  schema?: string;
  /** Maintenance (expiry of stuck jobs, deletion of old ones) runs in worker processes only. */
  supervise?: boolean;
  /** Install or upgrade pg-boss's schema at start: only the migrate step does (as the owner, directly). */
  migrate?: boolean;
  timeouts?: ConnectionTimeouts;
  /** How long a query waits for a connection before it fails. */
  connectTimeoutMs?: number;
  /** pg-boss's repeated statements (fetch, insert, complete) become named prepared statements. */
  prepare?: boolean;
  /** How often a supervising instance deletes finished jobs past their retention (s). */
  maintenanceIntervalSeconds?: number;
}

/** A pg-boss instance with its own bounded pool; no cron, and no LISTEN of its own (we wake workers). */
export function createBoss({
  connectionString,
  max = 3,
  schema = 'pgboss',
  supervise = false,
  migrate = false,
  timeouts,
  connectTimeoutMs = 10_000,
  prepare = false,
  maintenanceIntervalSeconds = DEFAULT_QUEUE_MAINTENANCE_INTERVAL_S,
}: BossOptions): PgBoss {
  return new PgBoss({
    connectionString,
    max,
    schema,
    supervise,
    maintenanceIntervalSeconds,
    // Supervision is what runs maintenance when it is due: check at least as often.
    superviseIntervalSeconds: Math.min(60, maintenanceIntervalSeconds),
    schedule: false,
    migrate,
    useListenNotify: false,
    application_name: 'durable-mcp-tasks:pg-boss',
    options: connectionOptions(timeouts),
    connectionTimeoutMillis: connectTimeoutMs,
    // Our spans cover the queue (the request that enqueues, each run leg, each step, one trace per task);
    // pg-boss's own would add a root `receive` span for every poll of every worker, jobs or not.
    openTelemetry: { enabled: false },
    // pg-boss hands its settings to pg.Pool: its clients, too, must survive a dropped connection.
    ...({ Client: prepare ? PreparingClient : GuardedClient } as object),
  });
}

/**
 * Creates (or updates) the run queue; safe when several processes start at once. Finished jobs are
 * deleted `retentionSeconds` after they finish.
 */
export async function ensureRunQueue(
  boss: PgBoss,
  retentionSeconds = DEFAULT_QUEUE_JOB_RETENTION_S,
): Promise<void> {
  const options = {
    // Delivery retries, for a worker that died between fetching a job and claiming its task.
    retryLimit: 20,
    retryDelay: 1,
    retryBackoff: true,
    retryDelayMax: 60,
    // A job is active only from fetch to claim, a few milliseconds; ten seconds means its worker died.
    // (Our own claim deadline redelivers such a run sooner than pg-boss's hourly-ish supervision would.)
    expireInSeconds: 10,
    deleteAfterSeconds: retentionSeconds,
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

/**
 * How long until the next delayed run of the queue comes due (a retry's delay, a durable sleep), in ms;
 * undefined when none waits. Idle workers sleep until then instead of a whole backstop interval, so a
 * sleeping task wakes on time whichever worker put it to sleep.
 */
export async function nextDelayedRunMs(boss: PgBoss, schema = 'pgboss'): Promise<number | undefined> {
  const { rows } = await boss.getDb().executeSql(
    `select extract(epoch from min(start_after) - now()) * 1000 as ms
       from ${schema}.job where name = $1 and state in ('created', 'retry') and start_after > now()`,
    [RUN_QUEUE],
  );
  const ms = (rows[0] as { ms?: string | number | null } | undefined)?.ms;
  return ms === null || ms === undefined ? undefined : Math.max(0, Number(ms));
}

/** The TaskQueue the task service uses: each enqueue is part of the caller's transaction. */
export class BossTaskQueue implements TaskQueue {
  readonly #boss: PgBoss;
  constructor(boss: PgBoss) {
    this.#boss = boss;
  }

  async enqueueRun(
    executor: Kysely<Database>,
    taskId: string,
    opts: { delayMs?: number; priority?: number } = {},
  ): Promise<void> {
    const payload: RunJob = { taskId };
    const delay = opts.delayMs ?? 0;
    await this.#boss.send(RUN_QUEUE, payload, {
      db: fromKysely(executor),
      priority: opts.priority ?? (await runPriority(executor, taskId)),
      // Seconds from the database's clock (pg-boss casts them to an interval, fractions kept).
      ...(delay > 0 ? { startAfter: delay / 1000 } : {}),
    });
    // Wakes idle workers at commit; a delayed run is found by the worker that scheduled it, or the poll.
    if (delay === 0) await sql`select pg_notify(${CHANNELS.run}, ${taskId})`.execute(executor);
  }

  /**
   * pg-boss's own INSERT of the run job, as `send` builds it (the queue's policy, retry and retention
   * settings), taken through send's public `db` option without being run; and the wake-up. Undefined
   * should a pg-boss version build something that cannot be embedded (several statements, other `$`).
   */
  async firstRun(taskId: string, priority: number): Promise<Statement[] | undefined> {
    const sent: Statement[] = [];
    const payload: RunJob = { taskId };
    await this.#boss.send(RUN_QUEUE, payload, {
      priority,
      db: {
        executeSql: (text: string, values?: unknown[]) => {
          sent.push({ text, values: values ?? [] });
          return Promise.resolve({ rows: [{ id: '' }] });
        },
      },
    });
    const [insert] = sent;
    if (sent.length !== 1 || insert === undefined || !embeddable(insert)) return undefined;
    return [insert, { text: 'select pg_notify($1, $2)', values: [CHANNELS.run, taskId] }];
  }
}
