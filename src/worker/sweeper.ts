import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { Metrics } from '../core/metrics.ts';
import { coerceError, type Logger } from '../log.ts';
import type { TaskQueue } from '../tasks/service.ts';
import { reclaimExpiredLeases, redeliverStuckRuns } from '../tasks/store/lease.ts';
import { purgeSessionEvents, purgeSessions } from '../rev2025-11-25/sessions/sweep.ts';
import { expireTasks, purgeTasks, sweepNeeded } from '../tasks/store/sweep.ts';

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
  /** 2025-11-25 sessions: idle expiry and the stream log's retention; swept once a minute at most. */
  sessions?: { idleTtlMs: number; eventRetentionMs: number };
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
 * deadline are redelivered (by idle workers only); expired tasks fail; expired
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
  sessions = { idleTtlMs: 3_600_000, eventRetentionMs: 900_000 },
}: SweeperOptions) {
  let sessionsSweptAt = 0;
  const sweepSessions = async () => {
    sessionsSweptAt = Date.now();
    const ended = await drain(() => purgeSessions(db, batchSize, sessions.idleTtlMs), batchSize);
    const events = await drain(() => purgeSessionEvents(db, batchSize, sessions.eventRetentionMs), batchSize);
    if (ended + events > 0) log.info('session sweep', { sessions: ended, events });
    return { sessions: ended, events };
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
    const expired = await drain(async () => (await expireTasks(db, batchSize)).length, batchSize);
    const purged = await drain(() => purgeTasks(db, batchSize, purgeGraceMs), batchSize);
    if (reclaimed + expired + purged > 0) log.info('sweep', { reclaimed, expired, purged });
    return { reclaimed, expired, purged };
  };
  let sweeping = false;
  const timer = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    sweepNeeded(db, purgeGraceMs)
      .then((needed) => (needed ? sweep() : undefined))
      .then(() => (Date.now() - sessionsSweptAt >= 60_000 ? sweepSessions() : undefined))
      .catch((err: unknown) => log.warn('sweep failed', { error: coerceError(err).message }))
      .finally(() => (sweeping = false));
  }, intervalMs);
  return { sweep, sweepSessions, stop: () => clearInterval(timer) };
}
