import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Kysely } from 'kysely';
import type { JobWithMetadata, PgBoss } from 'pg-boss';
import type { Database } from '../src/db/database.ts';
import { coerceError, type Logger } from '../src/log.ts';
import { RUN_QUEUE, RunJobSchema, type RunJob } from '../src/queue/boss.ts';
import { CancelRequestedError, runTaskLeg, type RunningAttempts } from '../src/tasks/executor.ts';
import type { TaskQueue } from '../src/tasks/service.ts';
import { checkLeases, LeaseLostError, reclaimExpiredLeases } from '../src/tasks/store/lease.ts';
import { expireTasks, purgeTasks } from '../src/tasks/store/sweep.ts';
import type { ToolRegistry } from '../src/tools/registry.ts';
import type { ServerEvents } from '../src/events/server-events.ts';

export interface WorkerPoolOptions {
  db: Kysely<Database>;
  boss: PgBoss;
  /** Where reclaimed tasks are re-enqueued. */
  queue: TaskQueue;
  tools: ToolRegistry;
  events?: ServerEvents;
  log: Logger;
  concurrency?: number;
  pollIntervalSeconds?: number;
  leaseMs?: number;
  cancelCheckIntervalMs?: number;
  statusThrottleMs?: number;
  sweepIntervalMs?: number;
  sweepBatchSize?: number;
  purgeGraceMs?: number;
}

export interface WorkerPool {
  readonly workerId: string;
  readonly running: RunningAttempts;
  /** Runs one sweep now (lapsed leases, expiry, purge); used by tests and by the timer. */
  sweep(): Promise<{ reclaimed: number; expired: number; purged: number }>;
  stop(): Promise<void>;
}

/** A bounded loop of batched statements, so a sweep's cost per run stays bounded too. */
async function drain(batch: () => Promise<number>, batchSize: number, maxBatches = 20): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const n = await batch();
    total += n;
    if (n < batchSize) break;
  }
  return total;
}

/**
 * Takes task legs from pg-boss and runs them; watches running attempts for cancel requests and lost
 * leases (aborting their signals); sweeps expired tasks.
 */
export async function startWorkerPool(opts: WorkerPoolOptions): Promise<WorkerPool> {
  const {
    db,
    boss,
    queue,
    tools,
    concurrency = 4,
    pollIntervalSeconds = 0.5,
    leaseMs = 30_000,
    cancelCheckIntervalMs = 250,
    statusThrottleMs = 250,
    sweepIntervalMs = 5_000,
    sweepBatchSize = 500,
    purgeGraceMs = 60_000,
  } = opts;
  const workerId = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const log = opts.log.scope({ worker: workerId });
  const running: RunningAttempts = new Map();
  const deps = { db, tools, workerId, leaseMs, statusThrottleMs, running, events: opts.events, log };

  await boss.work<RunJob>(
    RUN_QUEUE,
    {
      localConcurrency: concurrency,
      batchSize: 1,
      includeMetadata: true,
      pollingIntervalSeconds: pollIntervalSeconds,
      // pg-boss waits this long between fetches even with a backlog, so keep it short (issue 4 revisits).
      notifyPollingIntervalSeconds: pollIntervalSeconds,
    },
    async (jobs) => {
      for (const job of jobs as JobWithMetadata<RunJob>[]) {
        const { taskId } = RunJobSchema.parse(job.data);
        await runTaskLeg(deps, { taskId, retryCount: job.retryCount, retryLimit: job.retryLimit });
      }
    },
  );

  let lastRenew = Date.now();
  let watching = false;
  const watch = async () => {
    if (watching || running.size === 0) return;
    watching = true;
    try {
      const renew = Date.now() - lastRenew >= leaseMs / 3;
      const attempts = new Map([...running].map(([taskId, r]) => [taskId, r.attempt]));
      const states = await checkLeases(db, attempts, leaseMs, renew);
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
  const watcher = setInterval(() => void watch(), cancelCheckIntervalMs);

  const reclaim = () =>
    db.transaction().execute(async (trx) => {
      const ids = await reclaimExpiredLeases(trx, sweepBatchSize);
      for (const taskId of ids) await queue.enqueueRun(trx, taskId);
      return ids.length;
    });
  const sweep = async () => {
    const reclaimed = await drain(reclaim, sweepBatchSize);
    const expired = await drain(async () => (await expireTasks(db, sweepBatchSize)).length, sweepBatchSize);
    const purged = await drain(() => purgeTasks(db, sweepBatchSize, purgeGraceMs), sweepBatchSize);
    if (reclaimed + expired + purged > 0) log.info('sweep', { reclaimed, expired, purged });
    return { reclaimed, expired, purged };
  };
  let sweeping = false;
  const sweeper = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    sweep()
      .catch((err: unknown) => log.warn('sweep failed', { error: coerceError(err).message }))
      .finally(() => (sweeping = false));
  }, sweepIntervalMs);

  return {
    workerId,
    running,
    sweep,
    async stop() {
      clearInterval(sweeper);
      clearInterval(watcher);
      await boss.offWork(RUN_QUEUE, { wait: true });
    },
  };
}
