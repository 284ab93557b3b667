import { artifactPath } from '../core/artifacts.ts';
import { MCP_PATH } from '../core/wire.ts';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { PgBoss } from 'pg-boss';
import type { Database } from '../db/database.ts';
import { CHANNELS, type ChangeFeed } from '../events/change-feed.ts';
import type { ServerEvents } from '../events/server-events.ts';
import { coerceError, type Logger } from '../log.ts';
import type { LocalStart, TaskQueue } from '../tasks/service.ts';
import { claimTasks, nextWaitingForKey } from '../tasks/store/claim.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { Metrics } from '../core/metrics.ts';
import { coalesce } from '../core/coalesce.ts';
import { finishAttempt, finishAttempts } from '../tasks/store/finish.ts';
import { saveStep, saveSteps } from '../tasks/store/steps.ts';
import { HandoffSignal } from './leg-signals.ts';
import { runFetchLoop } from './fetch-loop.ts';
import { nextDelayedRunMs } from '../queue/boss.ts';
import { runTaskLeg } from './leg.ts';
import type { LegDeps } from './leg-deps.ts';
import { MapItemCache } from './map-item.ts';
import { startLeaseKeeper } from './lease-keeper.ts';
import type { RunningAttempts } from './outcome.ts';
import { Slots } from './slots.ts';
import { createSweeper, type MaintenanceJob } from './sweeper.ts';

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
  /** Slots kept for light principals' runs (fair share; see Slots.reserved). Default: an eighth. */
  reservedSlots?: number | undefined;
  /** Backstop poll while idle, in case a wake-up was lost (and for delayed retries of other workers). */
  pollIntervalMs?: number;
  leaseMs?: number;
  cancelCheckIntervalMs?: number;
  /** CANCEL_GRACE_MS: a cancelled handler that has not ended this long after its signal fired is let go. */
  cancelGraceMs?: number;
  statusThrottleMs?: number;
  retryLimit?: number;
  retryDelaySeconds?: number;
  maxResultBytes?: number;
  /** MAX_STEP_BYTES: a step whose value is larger (as JSON) fails its task. */
  maxStepBytes?: number | undefined;
  /** MAX_ARTIFACT_BYTES: an artifact that grows larger fails its task. */
  maxArtifactBytes?: number | undefined;
  /** MAX_STEPS_PER_TASK: a task recording more steps fails. */
  maxStepsPerTask?: number | undefined;
  sweepIntervalMs?: number;
  sweepBatchSize?: number;
  purgeGraceMs?: number;
  /** Maintenance beside the task sweep (the composition root passes a protocol era's). */
  maintenance?: readonly MaintenanceJob[] | undefined;
  /** How long stop() lets running steps finish before it aborts them and hands their tasks back. */
  shutdownGraceMs?: number;
  /** A signal's delivery URL from its token (default: a path, `/signals/{token}`). */
  signalUrl?: ((token: string) => string) | undefined;
  /** An artifact's download URL (default: a path, `/mcp/artifacts/{taskId}/{name}`). */
  artifactUrl?: ((taskId: string, name: string) => string) | undefined;
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
   * backlog), and not while it stops; a reserved slot only for a light principal's task (`rank`: how
   * many active tasks the principal holds; see Slots.reserved).
   */
  startHere(rank: number): LocalStart | undefined;
  /** Graceful: stop fetching, let running steps finish (up to the grace period), hand the rest back. */
  stop(): Promise<void>;
}

/**
 * The worker pool: takes runs from the queue into its slots (fetch-loop.ts), runs each as a task leg
 * (leg.ts), keeps the running attempts' leases and stops those whose task was cancelled
 * (lease-keeper.ts), and sweeps expired tasks (sweeper.ts).
 */
export async function startWorkerPool(opts: WorkerPoolOptions): Promise<WorkerPool> {
  const { db, leaseMs = 15_000, shutdownGraceMs = 10_000 } = opts;
  const workerId = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const log = opts.log.scope({ worker: workerId });
  const running: RunningAttempts = new Map();
  const slots = new Slots(opts.concurrency ?? 32, opts.reservedSlots);
  opts.metrics?.addWorkerSlots(() => slots.concurrency - slots.free);
  const deps = legDepsOf(opts, { workerId, leaseMs, running, slots, log });

  const legs = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>) => {
    legs.add(work);
    void work.finally(() => legs.delete(work));
  };
  /**
   * Runs a leg (once `after` resolves) in a slot already taken, then each leg it hands on (a map's next
   * item, or its woken parent); gives the slot back at the end.
   */
  const runLeg = (
    taskId: string,
    claimed: ClaimedTask | undefined,
    after: Promise<void> = Promise.resolve(),
  ) =>
    track(
      after
        .then(async () => {
          let next;
          try {
            next = await runTaskLeg(deps, taskId, claimed);
          } finally {
            if (claimed?.concurrencyKey !== undefined) await wakeNextForKey(claimed.concurrencyKey);
          }
          while (next !== undefined) next = await runTaskLeg(deps, next.taskId, next);
        })
        .catch((err: unknown) =>
          log.warn('run failed before it settled', { taskId, error: coerceError(err).message }),
        )
        .finally(() => slots.release()),
    );
  /** A leg with a concurrency key ended: the oldest task waiting for its place gets a run. */
  const wakeNextForKey = (key: string) =>
    db
      .transaction()
      .execute(async (trx) => {
        const waiting = await nextWaitingForKey(trx, key);
        if (waiting !== undefined) await opts.queue.enqueueRun(trx, waiting);
      })
      // The sweeper redelivers a waiting task past its claim deadline: the backstop.
      .catch((err: unknown) =>
        log.warn('waking a task waiting for its key failed', { error: coerceError(err).message }),
      );
  const startHere = (rank: number): LocalStart | undefined => {
    if (slots.stopping || slots.runsWaiting) return undefined;
    if (slots.freeForAny <= 0 && !(slots.free > 0 && slots.isLight(rank))) return undefined;
    slots.take();
    return {
      workerId,
      leaseMs,
      // After the caller's turn: the create's answer goes out before the handler's first synchronous work.
      run: (task) => runLeg(task.taskId, task, nextTurn()),
      release: () => slots.release(),
    };
  };

  const loop = runFetchLoop({
    boss: opts.boss,
    slots,
    pollIntervalMs: opts.pollIntervalMs ?? 5_000,
    // A task delivered twice in one batch is claimed for its first delivery only.
    claim: async (taskIds) => {
      const claimed = await claimTasks(db, [...new Set(taskIds)], workerId, leaseMs);
      return taskIds.map((taskId) => {
        const task = claimed.get(taskId);
        claimed.delete(taskId);
        return task;
      });
    },
    runLeg: (taskId, claimed) => runLeg(taskId, claimed),
    nextDelayedRun: () => nextDelayedRunMs(opts.boss),
    track,
    log,
  });
  const leases = startLeaseKeeper({
    db,
    workerId,
    running,
    leaseMs,
    cancelCheckIntervalMs: opts.cancelCheckIntervalMs ?? 1_000,
    cancelGraceMs: opts.cancelGraceMs ?? 3_000,
    metrics: opts.metrics,
    log,
  });
  opts.metrics?.addStuckLegs(() => leases.stuckLegs());
  const offFeed = [
    opts.feed.on(CHANNELS.run, () => slots.notice()),
    // A cancel request (or expiry) of a task this process runs is checked at once. Not every change: the
    // worker's own status messages would each cost a lease check.
    opts.feed.on(CHANNELS.taskCancel, (taskId) => {
      if (running.has(taskId)) void leases.check(taskId);
    }),
    opts.feed.onResync(() => {
      slots.notice();
      void leases.check();
    }),
  ];
  const sweeper = createSweeper({
    db,
    queue: opts.queue,
    log,
    intervalMs: opts.sweepIntervalMs ?? 5_000,
    batchSize: opts.sweepBatchSize ?? 500,
    metrics: opts.metrics,
    purgeGraceMs: opts.purgeGraceMs ?? 60_000,
    maintenance: opts.maintenance,
    // Only a worker that just found the queue empty redelivers: with a backlog, a run waits its turn.
    idle: () => !slots.runsWaiting && slots.free > 0 && !slots.stopping,
  });

  return {
    workerId,
    running,
    startHere,
    sweep: sweeper.sweep,
    maintain: () => sweeper.maintain(),
    async stop() {
      slots.stop();
      sweeper.stop();
      for (const off of offFeed) off();
      await loop;
      // Running handlers get until the grace period ends to reach their next step boundary.
      const deadline = Date.now() + shutdownGraceMs;
      while (legs.size > 0 && Date.now() < deadline) await Promise.race([...legs, sleep(50)]);
      for (const entry of running.values()) entry.abort.abort(new HandoffSignal());
      await Promise.race([Promise.allSettled([...legs]), sleep(2_000)]);
      leases.stop();
    },
  };
}

/** What every leg of this pool runs with: the pool's settings, its slots, and its batched writes. */
function legDepsOf(
  opts: WorkerPoolOptions,
  {
    workerId,
    leaseMs,
    running,
    slots,
    log,
  }: { workerId: string; leaseMs: number; running: RunningAttempts; slots: Slots; log: Logger },
): LegDeps {
  return {
    db: opts.db,
    tools: opts.tools,
    queue: opts.queue,
    workerId,
    leaseMs,
    maps: new MapItemCache(opts.db, { workerId, leaseMs }),
    statusThrottleMs: opts.statusThrottleMs ?? 250,
    retryDefaults: {
      maxAttempts: (opts.retryLimit ?? 2) + 1,
      initialMs: (opts.retryDelaySeconds ?? 1) * 1000,
      factor: 1,
      maxMs: Number.POSITIVE_INFINITY,
    },
    maxResultBytes: opts.maxResultBytes,
    maxStepsPerTask: opts.maxStepsPerTask,
    maxStepBytes: opts.maxStepBytes,
    maxArtifactBytes: opts.maxArtifactBytes,
    signalUrl: opts.signalUrl ?? ((token) => `/signals/${token}`),
    artifactUrl: opts.artifactUrl ?? ((taskId, name) => artifactPath(MCP_PATH, taskId, name)),
    running,
    draining: () => slots.stopping,
    scheduleWake: (ms) => void setTimeout(() => slots.notice(), ms).unref(),
    events: opts.events,
    metrics: opts.metrics,
    // Concurrent legs' completions and checkpoints go to Postgres together: one statement and one
    // commit for all that are waiting, instead of one each.
    writes: {
      finish: coalesce(
        (finishes) => finishAttempts(opts.db, finishes),
        (f) => finishAttempt(opts.db, f.taskId, f.attempt, f.outcome),
      ),
      saveStep: coalesce(
        (steps) => saveSteps(opts.db, steps),
        (s) => saveStep(opts.db, s.taskId, s.attempt, s.name, s.value, s.position),
      ),
    },
    log,
  };
}
