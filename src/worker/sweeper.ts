import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { Metrics } from '../core/metrics.ts';
import { coerceError, type Logger } from '../log.ts';
import type { TaskQueue } from '../tasks/service.ts';
import { reclaimExpiredLeases, redeliverStuckRuns } from '../tasks/store/lease.ts';
import {
  ARTIFACT_PURGE_CHUNKS,
  expireTasks,
  purgeArtifactChunks,
  purgeEmptyArtifacts,
  purgeTasks,
  sweepNeeded,
} from '../tasks/store/sweep.ts';
import { failTimedOutTasks } from '../tasks/store/timeout.ts';

export interface SweeperOptions {
  db: Kysely<Database>;
  queue: TaskQueue;
  log: Logger;
  intervalMs: number;
  batchSize: number;
  purgeGraceMs: number;
  /** True when this worker has free slots: only then does it redeliver stuck runs. */
  idle: () => boolean;
  metrics?: Metrics | undefined;
  /** Jobs beside the task sweep, run on the same timer when due (a protocol revision's own tables). */
  maintenance?: readonly MaintenanceJob[] | undefined;
}

/**
 * A maintenance job the sweeper runs beside its own: `batch` deletes (or updates) at most `limit`
 * rows and says how many; it is called again while batches come back full, at most every `everyMs`.
 */
export interface MaintenanceJob {
  name: string;
  everyMs: number;
  batch: (limit: number) => Promise<number>;
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
 * The maintenance sweep every worker runs (safe concurrently: each statement skips rows another sweeper
 * holds): tasks whose attempt's lease lapsed are handed back and re-enqueued; queued runs past their claim
 * deadline are redelivered (by idle workers only); tasks past their timeoutMs fail; expired tasks fail; expired
 * finished tasks are purged after the grace period. A probe query first, so an idle sweep costs one read.
 */
export function createSweeper({
  db,
  queue,
  log,
  intervalMs,
  batchSize,
  purgeGraceMs,
  idle,
  metrics,
  maintenance = [],
}: SweeperOptions) {
  const ranAt = new Map<string, number>();
  /** Runs the maintenance jobs that are due (all of them with `force`); how many rows each touched. */
  const maintain = async (force = true) => {
    const counts: Record<string, number> = {};
    for (const job of maintenance) {
      if (!force && Date.now() - (ranAt.get(job.name) ?? 0) < job.everyMs) continue;
      ranAt.set(job.name, Date.now());
      counts[job.name] = await drain(() => job.batch(batchSize), batchSize);
    }
    if (Object.values(counts).some((n) => n > 0)) log.info('maintenance', counts);
    return counts;
  };
  const requeue = (select: (trx: Kysely<Database>, limit: number) => Promise<string[]>) => () =>
    db.transaction().execute(async (trx) => {
      const ids = await select(trx, batchSize);
      for (const taskId of ids) await queue.enqueueRun(trx, taskId);
      return ids.length;
    });
  const sweep = async () => {
    const takenOver = await drain(requeue(reclaimExpiredLeases), batchSize);
    metrics?.leaseTakeovers.inc(takenOver);
    const redelivered = idle() ? await drain(requeue(redeliverStuckRuns), batchSize) : 0;
    metrics?.redeliveries.inc(redelivered);
    const reclaimed = takenOver + redelivered;
    const timedOut = await drain(async () => (await failTimedOutTasks(db, batchSize)).length, batchSize);
    const expired = await drain(async () => (await expireTasks(db, batchSize)).length, batchSize);
    const chunks = await drain(
      () => purgeArtifactChunks(db, ARTIFACT_PURGE_CHUNKS, purgeGraceMs),
      ARTIFACT_PURGE_CHUNKS,
    );
    const artifacts = await drain(() => purgeEmptyArtifacts(db, batchSize, purgeGraceMs), batchSize);
    const purged = await drain(() => purgeTasks(db, batchSize, purgeGraceMs), batchSize);
    if (reclaimed + timedOut + expired + purged + artifacts > 0) {
      log.info('sweep', {
        reclaimed,
        timedOut,
        expired,
        purged,
        ...(artifacts > 0 && { artifacts, chunks }),
      });
    }
    return { reclaimed, timedOut, expired, purged };
  };
  let sweeping = false;
  const timer = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    sweepNeeded(db, purgeGraceMs)
      .then((needed) => (needed ? sweep() : undefined))
      .then(() => maintain(false))
      .catch((err: unknown) => log.warn('sweep failed', { error: coerceError(err).message }))
      .finally(() => (sweeping = false));
  }, intervalMs);
  return { sweep, maintain, stop: () => clearInterval(timer) };
}
