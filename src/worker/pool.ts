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
import type { Logger } from '../log.ts';
import type { LocalStart, TaskQueue } from '../tasks/service.ts';
import { claimTasks, type RunLater } from '../tasks/store/claim.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { Metrics } from '../core/metrics.ts';
import { coalesce } from '../core/coalesce.ts';
import { finishAttempt, finishAttempts } from '../tasks/store/finish.ts';
import { saveStep, saveSteps } from '../tasks/store/steps.ts';
import { HandBack } from './leg-stops.ts';
import { runFetchLoop } from './fetch-loop.ts';
import { nextDelayedRunMs } from '../queue/boss.ts';
import type { LegDeps } from './leg-deps.ts';
import { MapItemCache } from './map-item.ts';
import { startLeaseKeeper, type LeaseKeeper } from './lease-keeper.ts';
import type { RunningAttempts } from './outcome.ts';
import { createSlotWork, type SlotWork } from './slot-work.ts';
import { Slots } from './slots.ts';
import { createSweeper, type MaintenanceJob } from './sweeper.ts';
import { signalPath } from '../core/signal-delivery.ts';
import { deleteOldEvents } from '../tasks/store/events.ts';
import { DEFAULT_EVENT_LIMITS, type EventLimits } from './attempt-events.ts';

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
  /** CANCEL_GRACE_MS: a cancelled handler that has not ended this long after its abort signal fired is let go. */
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
  /** The bounds on a task's events (MAX_EVENT_BYTES…); defaults as the settings'. */
  eventLimits?: EventLimits | undefined;
  /** TASK_EVENT_RETENTION_MS: the sweep deletes older events; 0 or undefined keeps them with their task. */
  eventRetentionMs?: number | undefined;
  sweepIntervalMs?: number;
  sweepBatchSize?: number;
  purgeGraceMs?: number;
  /** Maintenance beside the task sweep (the composition root passes a protocol revision's). */
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
  sweep(): Promise<{ reclaimed: number; timedOut: number; expired: number; purged: number }>;
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

/** What the pool's parts share: its worker id, lease length, running attempts, slots and scoped log. */
interface PoolCore {
  workerId: string;
  leaseMs: number;
  running: RunningAttempts;
  slots: Slots;
  log: Logger;
}

/**
 * The worker pool: takes runs from the queue into its slots (fetch-loop.ts), hands each claimed task to
 * its legs (slot-work.ts, leg.ts), keeps the running attempts' leases and stops those whose task was
 * cancelled (lease-keeper.ts), and sweeps expired tasks (sweeper.ts).
 */
export async function startWorkerPool(opts: WorkerPoolOptions): Promise<WorkerPool> {
  const { leaseMs = 15_000 } = opts;
  const workerId = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const log = opts.log.scope({ worker: workerId });
  const running: RunningAttempts = new Map();
  const slots = new Slots(opts.concurrency ?? 32, opts.reservedSlots);
  opts.metrics?.addWorkerSlots(() => slots.concurrency - slots.free);
  const core: PoolCore = { workerId, leaseMs, running, slots, log };
  const work = new Set<Promise<unknown>>();
  const track = (w: Promise<unknown>) => {
    work.add(w);
    void w.finally(() => work.delete(w));
  };
  const { runLegs, settleUnclaimed } = createSlotWork(legDepsOf(opts, core), slots, track);
  const loop = runFetchLoop({
    boss: opts.boss,
    slots,
    pollIntervalMs: opts.pollIntervalMs ?? 5_000,
    claim: (taskIds) =>
      claimDeliveries(opts.db, taskIds, {
        workerId,
        leaseMs,
        // A task waiting for its rate limit runs when its place frees: its delayed run, which this
        // worker looks for then (no NOTIFY tells of a delayed run).
        runLater: async (trx, taskId, delayMs) => {
          await opts.queue.enqueueRun(trx, taskId, { delayMs });
          setTimeout(() => slots.notice(), delayMs).unref();
        },
      }),
    runLegs,
    settleUnclaimed,
    nextDelayedRun: () => nextDelayedRunMs(opts.boss),
    track,
    log,
  });
  const leases = leaseKeeperOf(opts, core);
  const offFeed = wakeOnFeed(opts.feed, { slots, running, leases });
  const sweeper = sweeperOf(opts, core);
  return {
    workerId,
    running,
    startHere: (rank) => localStart(slots, rank, { workerId, leaseMs, runLegs }),
    sweep: sweeper.sweep,
    maintain: () => sweeper.maintain(),
    async stop() {
      slots.stop();
      sweeper.stop();
      for (const off of offFeed) off();
      await loop;
      await handBackAfterGrace(work, running, opts.shutdownGraceMs ?? 10_000);
      leases.stop();
    },
  };
}

/** Claims a fetched batch's tasks; a task delivered twice in it is claimed for its first delivery only. */
async function claimDeliveries(
  db: Kysely<Database>,
  taskIds: readonly string[],
  { workerId, leaseMs, runLater }: { workerId: string; leaseMs: number; runLater: RunLater },
): Promise<(ClaimedTask | undefined)[]> {
  const claimed = await claimTasks(db, [...new Set(taskIds)], workerId, leaseMs, runLater);
  return taskIds.map((taskId) => {
    const task = claimed.get(taskId);
    claimed.delete(taskId);
    return task;
  });
}

/**
 * A slot for a task this process is creating (WorkerPool.startHere), or undefined: only while a slot is
 * free, no queued runs wait and the pool does not stop; a reserved slot only for a light principal.
 */
function localStart(
  slots: Slots,
  rank: number,
  { workerId, leaseMs, runLegs }: { workerId: string; leaseMs: number; runLegs: SlotWork['runLegs'] },
): LocalStart | undefined {
  if (slots.stopping || slots.runsWaiting) return undefined;
  if (slots.freeForAny <= 0 && !(slots.free > 0 && slots.isLight(rank))) return undefined;
  slots.take();
  return {
    workerId,
    leaseMs,
    // After the caller's turn: the create's answer goes out before the handler's first synchronous work.
    run: (task) => runLegs(task, nextTurn()),
    release: () => slots.release(),
  };
}

/** The pool's change-feed subscriptions (each returns its unsubscribe): new runs, cancels, resyncs. */
function wakeOnFeed(
  feed: ChangeFeed,
  { slots, running, leases }: { slots: Slots; running: RunningAttempts; leases: LeaseKeeper },
): (() => void)[] {
  return [
    feed.on(CHANNELS.run, () => slots.notice()),
    // A cancel request (or expiry) of a task this process runs is checked at once. Not every change: the
    // worker's own status messages would each cost a lease check.
    feed.on(CHANNELS.taskCancel, (taskId) => {
      if (running.has(taskId)) void leases.check(taskId);
    }),
    feed.onResync(() => {
      slots.notice();
      void leases.check();
    }),
  ];
}

/**
 * Stopping: running handlers get until the grace period ends to reach their next step boundary; the
 * attempts still running then are aborted (handed back), and given a moment to settle.
 */
async function handBackAfterGrace(
  work: ReadonlySet<Promise<unknown>>,
  running: RunningAttempts,
  graceMs: number,
): Promise<void> {
  const deadline = Date.now() + graceMs;
  while (work.size > 0 && Date.now() < deadline) await Promise.race([...work, sleep(50)]);
  for (const entry of running.values()) entry.abort.abort(new HandBack());
  await Promise.race([Promise.allSettled([...work]), sleep(2_000)]);
}

/** The pool's lease keeper, with its stuck legs counted in the metrics. */
function leaseKeeperOf(opts: WorkerPoolOptions, { workerId, leaseMs, running, log }: PoolCore): LeaseKeeper {
  const leases = startLeaseKeeper({
    db: opts.db,
    workerId,
    running,
    leaseMs,
    cancelCheckIntervalMs: opts.cancelCheckIntervalMs ?? 1_000,
    cancelGraceMs: opts.cancelGraceMs ?? 3_000,
    metrics: opts.metrics,
    log,
  });
  opts.metrics?.addStuckLegs(() => leases.stuckLegs());
  return leases;
}

/** TASK_EVENT_RETENTION_MS: events older than it are deleted, oldest first (none when it is 0). */
function eventRetention({ db, eventRetentionMs }: WorkerPoolOptions): MaintenanceJob[] {
  if (eventRetentionMs === undefined || eventRetentionMs <= 0) return [];
  const everyMs = Math.min(60_000, Math.max(1_000, Math.floor(eventRetentionMs / 4)));
  return [
    {
      name: 'task events',
      everyMs,
      batch: (limit) => deleteOldEvents(db, new Date(Date.now() - eventRetentionMs), limit),
    },
  ];
}

/** The pool's sweeper; it redelivers only while the pool is idle. */
function sweeperOf(opts: WorkerPoolOptions, { slots, log }: PoolCore) {
  return createSweeper({
    db: opts.db,
    queue: opts.queue,
    log,
    intervalMs: opts.sweepIntervalMs ?? 5_000,
    batchSize: opts.sweepBatchSize ?? 500,
    metrics: opts.metrics,
    purgeGraceMs: opts.purgeGraceMs ?? 60_000,
    maintenance: [...(opts.maintenance ?? []), ...eventRetention(opts)],
    // Only a worker that just found the queue empty redelivers: with a backlog, a run waits its turn.
    idle: () => !slots.runsWaiting && slots.free > 0 && !slots.stopping,
  });
}

/** What every leg of this pool runs with: the pool's settings, its slots, and its batched writes. */
function legDepsOf(opts: WorkerPoolOptions, { workerId, leaseMs, running, slots, log }: PoolCore): LegDeps {
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
    eventLimits: opts.eventLimits ?? DEFAULT_EVENT_LIMITS,
    maxStepBytes: opts.maxStepBytes,
    maxArtifactBytes: opts.maxArtifactBytes,
    signalUrl: opts.signalUrl ?? signalPath,
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
