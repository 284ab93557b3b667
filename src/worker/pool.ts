import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { JobWithMetadata, PgBoss } from 'pg-boss';
import type { Database } from '../db/database.ts';
import { CHANNELS, type ChangeFeed } from '../events/change-feed.ts';
import type { ServerEvents } from '../events/server-events.ts';
import { coerceError, type Logger } from '../log.ts';
import { RUN_QUEUE, RunJobSchema, type RunJob } from '../queue/boss.ts';
import {
  CancelRequestedError,
  claimDeliveries,
  runTaskLeg,
  type ExecutorDeps,
  type RunningAttempts,
} from './executor.ts';
import type { LocalStart, TaskQueue } from '../tasks/service.ts';
import { checkLeases, LeaseLostError, renewLeases, type ClaimedTask } from '../tasks/store/lease.ts';
import { HandoffSignal } from './task-runtime.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { Metrics } from '../core/metrics.ts';
import { createSweeper, type MaintenanceJob } from './sweeper.ts';
import { coalesce } from '../core/coalesce.ts';
import { finishAttempt, finishAttempts } from '../tasks/store/finish.ts';
import { saveStep, saveSteps } from '../tasks/store/steps.ts';

export interface WorkerPoolOptions {
  db: Kysely<Database>;
  boss: PgBoss;
  /** Where retries, hand-offs and reclaimed tasks are re-enqueued. */
  queue: TaskQueue;
  /** The process's LISTEN connection: new runs and cancel requests wake the pool at once. */
  feed: ChangeFeed;
  tools: ToolRegistry;
  events?: ServerEvents;
  metrics?: Metrics | undefined;
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
  /** Maintenance beside the task sweep (the composition root passes a protocol era's). */
  maintenance?: readonly MaintenanceJob[] | undefined;
  /** How long stop() lets running steps finish before it aborts them and hands their tasks back. */
  shutdownGraceMs?: number;
}

export interface WorkerPool {
  readonly workerId: string;
  readonly running: RunningAttempts;
  /** Runs one sweep now (lapsed leases, expiry, purge); used by tests and by the timer. */
  sweep(): Promise<{ reclaimed: number; expired: number; purged: number }>;
  /** Runs every maintenance job now; how many rows each touched, by name. */
  maintain(): Promise<Record<string, number>>;
  /**
   * A slot for a task this process is creating, to run here without the queue (see LocalStart):
   * only while the pool has a free slot and no queued runs are waiting (a new task must not overtake a
   * backlog), and not while it stops.
   */
  startHere(): LocalStart | undefined;
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
    concurrency = 32,
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
    scheduleWake: (ms) => void setTimeout(() => notice(), ms).unref(),
    events: opts.events,
    metrics: opts.metrics,
    // Concurrent legs' completions and checkpoints go to Postgres together: one statement and one
    // commit for all that are waiting, instead of one each.
    writes: {
      finish: coalesce(
        (finishes) => finishAttempts(db, finishes),
        (f) => finishAttempt(db, f.taskId, f.attempt, f.outcome),
      ),
      saveStep: coalesce(
        (steps) => saveSteps(db, steps),
        (s) => saveStep(db, s.taskId, s.attempt, s.name, s.value),
      ),
    },
    log,
  };

  // Wake-ups: a NOTIFY for a new run, a freed slot while runs wait, or a timer.
  let wake: () => void = () => {};
  let pending = false;
  const poke = () => {
    pending = true;
    wake();
  };
  /** Resolves true when the time ran out, false when poked. */
  const idle = (ms: number) =>
    new Promise<boolean>((resolve) => {
      if (pending || stopping) return resolve(false);
      const timer = setTimeout(() => resolve(true), ms);
      wake = () => {
        clearTimeout(timer);
        resolve(false);
      };
    });

  let active = 0;
  /**
   * Runs may be waiting in the queue. Cleared by a fetch that found fewer than it could take (unless a
   * notice came while it ran), set by a NOTIFY, a resync, a scheduled retry or the backstop timer. A
   * freed slot fetches only while it is set: without it, a worker would poll an empty queue after every
   * task it ran.
   */
  let runsWaiting = true;
  let notices = 0;
  const notice = () => {
    notices++;
    runsWaiting = true;
    poke();
  };
  const slotFreed = () => {
    if (runsWaiting) poke();
  };
  const legs = new Set<Promise<void>>();
  const track = (work: Promise<void>) => {
    legs.add(work);
    void work.finally(() => legs.delete(work));
  };
  /**
   * A fetched batch: its tasks claimed with one statement, its deliveries acknowledged with one (while
   * the legs run), then one leg per delivery, each freeing its slot when it ends.
   */
  const runBatch = (jobs: JobWithMetadata<RunJob>[]) => {
    active += jobs.length;
    track(
      (async () => {
        const valid: { job: JobWithMetadata<RunJob>; taskId: string }[] = [];
        const invalid: string[] = [];
        for (const job of jobs) {
          const parsed = RunJobSchema.safeParse(job.data);
          if (parsed.success) valid.push({ job, taskId: parsed.data.taskId });
          else invalid.push(job.id);
        }
        const settle = async (ids: string[], err: unknown) => {
          if (ids.length === 0) return;
          // Infrastructure trouble (e.g. the database went away): pg-boss redelivers the jobs later.
          log.warn('runs failed before they settled', { jobs: ids.length, error: coerceError(err).message });
          await boss.fail(RUN_QUEUE, ids, { message: coerceError(err).message }).catch(() => {});
        };
        active -= invalid.length;
        if (invalid.length > 0) slotFreed();
        await settle(invalid, new Error('malformed run job'));
        const jobIds = valid.map((v) => v.job.id);
        let claims: Awaited<ReturnType<typeof claimDeliveries>>;
        try {
          claims = await claimDeliveries(
            deps,
            valid.map((v) => v.taskId),
          );
        } catch (err) {
          active -= valid.length;
          slotFreed();
          await settle(jobIds, err);
          return;
        }
        // If the acknowledgement fails, pg-boss redelivers after the job's expiry and the claim refuses it.
        track(
          boss.complete(RUN_QUEUE, jobIds).then(
            () => undefined,
            (err: unknown) =>
              log.warn('acknowledging runs failed; their redelivery will find the tasks claimed', {
                jobs: valid.length,
                error: coerceError(err).message,
              }),
          ),
        );
        valid.forEach(({ taskId }, i) => runLeg(taskId, claims[i]));
      })(),
    );
  };
  /** Runs a leg (once `after` resolves) in a slot already counted in `active`; frees the slot at its end. */
  const runLeg = (taskId: string, claimed: ClaimedTask | undefined, after?: Promise<void>) =>
    track(
      (after === undefined
        ? runTaskLeg(deps, taskId, claimed)
        : after.then(() => runTaskLeg(deps, taskId, claimed))
      )
        .catch((err: unknown) =>
          log.warn('run failed before it settled', { taskId, error: coerceError(err).message }),
        )
        .finally(() => {
          active--;
          slotFreed();
        }),
    );
  const startHere = (): LocalStart | undefined => {
    if (stopping || runsWaiting || active >= concurrency) return undefined;
    active++;
    return {
      workerId,
      leaseMs,
      // After the caller's turn: the create's answer goes out before the handler's first synchronous work.
      run: (task) => runLeg(task.taskId, task, nextTurn()),
      release: () => {
        active--;
        slotFreed();
      },
    };
  };

  const loop = (async () => {
    let backoff = 100;
    while (!stopping) {
      pending = false;
      const free = concurrency - active;
      if (free > 0 && runsWaiting) {
        const seen = notices;
        try {
          const jobs = await boss.fetch<RunJob>(RUN_QUEUE, { batchSize: free, includeMetadata: true });
          backoff = 100;
          if (jobs.length < free && notices === seen) runsWaiting = false;
          if (jobs.length > 0) runBatch(jobs);
          if (jobs.length === free) continue; // maybe more waiting
        } catch (err) {
          log.warn('fetching runs failed', { error: coerceError(err).message });
          await sleep(backoff);
          backoff = Math.min(backoff * 2, 5_000);
          continue;
        }
      }
      // The backstop poll: a wake-up may have been lost, or another worker's delayed retry came due.
      if (await idle(pollIntervalMs)) runsWaiting = true;
    }
  })();

  const stop = (taskId: string, reason: Error) => {
    const entry = running.get(taskId);
    if (entry !== undefined && !entry.abort.signal.aborted) entry.abort.abort(reason);
  };
  const attemptsOf = (only?: string) =>
    new Map(
      [...running].filter(([id]) => only === undefined || id === only).map(([id, r]) => [id, r.attempt]),
    );

  // Watch: cancel requests and lost leases stop attempts. Checks asked for while one runs are not
  // dropped: one more check follows.
  let watching = false;
  let again = false;
  const watch = async (only?: string): Promise<void> => {
    if (running.size === 0) return;
    if (watching) {
      again = true;
      return;
    }
    watching = true;
    try {
      for (const state of await checkLeases(db, workerId, attemptsOf(only))) {
        // A cancel that already ended the task (2025-11-25 cancels at once) is a cancel, not a lost lease.
        if (state.cancelRequested) stop(state.taskId, new CancelRequestedError());
        else if (!state.held)
          stop(state.taskId, new LeaseLostError(state.taskId, running.get(state.taskId)?.attempt ?? 0));
      }
    } catch (err) {
      log.warn('lease check failed', { error: coerceError(err).message });
    } finally {
      watching = false;
    }
    if (again) {
      again = false;
      await watch();
    }
  };
  const watcher = setInterval(() => void watch(), cancelCheckIntervalMs);

  // Renewal, on its own timer so that nothing can starve it. A worker that cannot renew for most of
  // a lease stops its attempts: past the lease another worker may already run them.
  let lastRenewed = Date.now();
  let renewing = false;
  const renewer = setInterval(() => {
    if (renewing) return;
    if (running.size === 0) {
      lastRenewed = Date.now();
      return;
    }
    renewing = true;
    const attempts = attemptsOf();
    renewLeases(db, workerId, attempts, leaseMs)
      .then((renewed) => {
        lastRenewed = Date.now();
        for (const [taskId, attempt] of attempts) {
          if (!renewed.has(taskId)) stop(taskId, new LeaseLostError(taskId, attempt));
        }
      })
      .catch((err: unknown) => {
        log.warn('lease renewal failed', { error: coerceError(err).message });
        if (Date.now() - lastRenewed > leaseMs * 0.8) {
          for (const [taskId, attempt] of attempts) stop(taskId, new LeaseLostError(taskId, attempt));
        }
      })
      .finally(() => (renewing = false));
  }, leaseMs / 3);
  const offFeed = [
    feed.on(CHANNELS.run, () => notice()),
    // A cancel request (or expiry) of a task this process runs is checked at once. Not every change: the
    // worker's own status messages would each cost a lease check.
    feed.on(CHANNELS.taskCancel, (taskId) => {
      if (running.has(taskId)) void watch(taskId);
    }),
    feed.onResync(() => {
      notice();
      void watch();
    }),
  ];

  const sweeper = createSweeper({
    db,
    queue,
    log,
    intervalMs: opts.sweepIntervalMs ?? 5_000,
    batchSize: opts.sweepBatchSize ?? 500,
    metrics: opts.metrics,
    purgeGraceMs: opts.purgeGraceMs ?? 60_000,
    maintenance: opts.maintenance,
    // Only a worker that just found the queue empty redelivers: with a backlog, a run waits its turn.
    idle: () => !runsWaiting && active < concurrency && !stopping,
  });

  return {
    workerId,
    running,
    startHere,
    sweep: sweeper.sweep,
    maintain: () => sweeper.maintain(),
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
      clearInterval(renewer);
    },
  };
}
