import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { JobWithMetadata, PgBoss } from 'pg-boss';
import type { Database } from '../src/db/database.ts';
import type { ChangeFeed } from '../src/events/change-feed.ts';
import type { ServerEvents } from '../src/events/server-events.ts';
import { coerceError, type Logger } from '../src/log.ts';
import { RUN_QUEUE, RunJobSchema, type RunJob } from '../src/queue/boss.ts';
import {
  CancelRequestedError,
  runTaskLeg,
  type ExecutorDeps,
  type RunningAttempts,
} from '../src/tasks/executor.ts';
import type { TaskQueue } from '../src/tasks/service.ts';
import { checkLeases, LeaseLostError } from '../src/tasks/store/lease.ts';
import { HandoffSignal } from '../src/tasks/task-runtime.ts';
import type { ToolRegistry } from '../src/tools/registry.ts';
import { createSweeper } from './sweeper.ts';

export interface WorkerPoolOptions {
  db: Kysely<Database>;
  boss: PgBoss;
  /** Where retries, hand-offs and reclaimed tasks are re-enqueued. */
  queue: TaskQueue;
  /** The process's LISTEN connection: new runs and cancel requests wake the pool at once. */
  feed: ChangeFeed;
  tools: ToolRegistry;
  events?: ServerEvents;
  log: Logger;
  concurrency?: number;
  /** Backstop poll while idle, in case a wake-up was lost (and for delayed retries of other workers). */
  pollIntervalMs?: number;
  leaseMs?: number;
  cancelCheckIntervalMs?: number;
  statusThrottleMs?: number;
  retryLimit?: number;
  retryDelaySeconds?: number;
  maxResultBytes?: number;
  sweepIntervalMs?: number;
  sweepBatchSize?: number;
  purgeGraceMs?: number;
  /** How long stop() lets running steps finish before it aborts them and hands their tasks back. */
  shutdownGraceMs?: number;
}

export interface WorkerPool {
  readonly workerId: string;
  readonly running: RunningAttempts;
  /** Runs one sweep now (lapsed leases, expiry, purge); used by tests and by the timer. */
  sweep(): Promise<{ reclaimed: number; expired: number; purged: number }>;
  /** Graceful: stop fetching, let running steps finish (up to the grace period), hand the rest back. */
  stop(): Promise<void>;
}

/**
 * The worker pool: fetches run jobs from pg-boss itself (up to `concurrency` at a time, at once when a
 * NOTIFY says a run was enqueued, otherwise on a slow backstop poll), runs task legs, watches running
 * attempts for cancel requests and lost leases, renews their leases, and sweeps expired tasks.
 */
export async function startWorkerPool(opts: WorkerPoolOptions): Promise<WorkerPool> {
  const {
    db,
    boss,
    queue,
    feed,
    tools,
    concurrency = 4,
    pollIntervalMs = 5_000,
    leaseMs = 15_000,
    cancelCheckIntervalMs = 1_000,
    statusThrottleMs = 250,
    retryLimit = 2,
    retryDelaySeconds = 1,
    shutdownGraceMs = 10_000,
  } = opts;
  const workerId = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const log = opts.log.scope({ worker: workerId });
  const running: RunningAttempts = new Map();
  let stopping = false;
  const deps: ExecutorDeps = {
    db,
    tools,
    queue,
    workerId,
    leaseMs,
    statusThrottleMs,
    retryLimit,
    retryDelaySeconds,
    maxResultBytes: opts.maxResultBytes,
    running,
    draining: () => stopping,
    scheduleWake: (ms) => void setTimeout(() => poke(), ms).unref(),
    events: opts.events,
    log,
  };

  // Wake-ups: a NOTIFY for a new run, a freed slot, or a timer.
  let wake: () => void = () => {};
  let pending = false;
  const poke = () => {
    pending = true;
    wake();
  };
  const idle = (ms: number) =>
    new Promise<void>((resolve) => {
      if (pending || stopping) return resolve();
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  let active = 0;
  const legs = new Set<Promise<void>>();
  const runJob = (job: JobWithMetadata<RunJob>) => {
    active++;
    const leg = (async () => {
      try {
        const { taskId } = RunJobSchema.parse(job.data);
        await runTaskLeg(deps, { taskId, ack: async () => void (await boss.complete(RUN_QUEUE, job.id)) });
      } catch (err) {
        // Infrastructure trouble (e.g. the database went away): pg-boss redelivers the job later.
        log.warn('run failed before it settled', { jobId: job.id, error: coerceError(err).message });
        await boss.fail(RUN_QUEUE, job.id, { message: coerceError(err).message }).catch(() => {});
      }
    })().finally(() => {
      active--;
      legs.delete(leg);
      poke();
    });
    legs.add(leg);
  };

  const loop = (async () => {
    let backoff = 100;
    while (!stopping) {
      pending = false;
      const free = concurrency - active;
      if (free > 0) {
        try {
          const jobs = await boss.fetch<RunJob>(RUN_QUEUE, { batchSize: free, includeMetadata: true });
          backoff = 100;
          for (const job of jobs) runJob(job);
          if (jobs.length === free) continue; // maybe more waiting
        } catch (err) {
          log.warn('fetching runs failed', { error: coerceError(err).message });
          await sleep(backoff);
          backoff = Math.min(backoff * 2, 5_000);
          continue;
        }
      }
      await idle(pollIntervalMs);
    }
  })();

  // Lease watch: cancel requests and lost leases stop attempts; leases are renewed while held.
  let lastRenew = Date.now();
  let watching = false;
  const watch = async (only?: string) => {
    if (watching || running.size === 0) return;
    watching = true;
    try {
      const renew = only === undefined && Date.now() - lastRenew >= leaseMs / 3;
      const entries = [...running].filter(([taskId]) => only === undefined || taskId === only);
      const states = await checkLeases(
        db,
        new Map(entries.map(([id, r]) => [id, r.attempt])),
        leaseMs,
        renew,
      );
      if (renew) lastRenew = Date.now();
      for (const state of states) {
        const entry = running.get(state.taskId);
        if (entry === undefined || entry.abort.signal.aborted) continue;
        if (!state.held) entry.abort.abort(new LeaseLostError(state.taskId, entry.attempt));
        else if (state.cancelRequested) entry.abort.abort(new CancelRequestedError());
      }
    } catch (err) {
      log.warn('lease check failed', { error: coerceError(err).message });
    } finally {
      watching = false;
    }
  };
  const watcher = setInterval(() => void watch(), Math.min(cancelCheckIntervalMs, leaseMs / 3));
  const offFeed = [
    feed.on('run', () => poke()),
    // Any change to a task this process runs (a cancel request, expiry…) is checked at once.
    feed.on('task', (taskId) => {
      if (running.has(taskId)) void watch(taskId);
    }),
    feed.onResync(() => {
      poke();
      void watch();
    }),
  ];

  const sweeper = createSweeper({
    db,
    queue,
    log,
    intervalMs: opts.sweepIntervalMs ?? 5_000,
    batchSize: opts.sweepBatchSize ?? 500,
    purgeGraceMs: opts.purgeGraceMs ?? 60_000,
    idle: () => active < concurrency && !stopping,
  });

  return {
    workerId,
    running,
    sweep: sweeper.sweep,
    async stop() {
      stopping = true;
      wake();
      sweeper.stop();
      for (const off of offFeed) off();
      await loop;
      // Running handlers get until the grace period ends to reach their next step boundary.
      const deadline = Date.now() + shutdownGraceMs;
      while (legs.size > 0 && Date.now() < deadline) await Promise.race([...legs, sleep(50)]);
      for (const entry of running.values()) entry.abort.abort(new HandoffSignal());
      await Promise.race([Promise.allSettled([...legs]), sleep(2_000)]);
      clearInterval(watcher);
    },
  };
}
