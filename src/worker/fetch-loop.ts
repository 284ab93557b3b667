import { setTimeout as sleep } from 'node:timers/promises';
import type { JobWithMetadata, PgBoss } from 'pg-boss';
import { coerceError, type Logger } from '../log.ts';
import { RUN_QUEUE, RunJobSchema, type RunJob } from '../queue/boss.ts';
import { priorityOfRank } from '../queue/priority.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import type { Slots } from './slots.ts';

export interface FetchLoopOptions {
  boss: PgBoss;
  slots: Slots;
  /** Backstop poll while idle, in case a wake-up was lost (and for delayed runs of other workers). */
  pollIntervalMs: number;
  /** Claims the tasks of a batch in one statement; undefined where a task is not runnable. */
  claim: (taskIds: readonly string[]) => Promise<(ClaimedTask | undefined)[]>;
  /** Starts a claimed task's legs in a slot already taken; they give the slot back when they end. */
  runLegs: (task: ClaimedTask) => void;
  /** A delivery whose task was not claimed, in a slot already taken: given back once it is settled. */
  settleUnclaimed: (taskId: string) => void;
  /** How long until the queue's next delayed run comes due (ms), undefined when none waits. */
  nextDelayedRun: () => Promise<number | undefined>;
  /** Work the pool waits for when it stops. */
  track: (work: Promise<unknown>) => void;
  log: Logger;
}

/**
 * Fetches run jobs from pg-boss while slots are free and runs may be waiting, up to one per free slot
 * (by priority, so lighter principals' runs first: queue/priority.ts), and into the reserved slots only
 * light principals' runs; otherwise waits to be poked or for the backstop interval. Resolves once the
 * slots are stopped.
 */
export async function runFetchLoop(opts: FetchLoopOptions): Promise<void> {
  const { boss, slots, log } = opts;
  let backoff = 100;
  /** When a delayed run (a retry, a durable sleep) comes due, as the last look at an empty queue saw it. */
  let dueAt: number | undefined;
  while (!slots.stopping) {
    slots.beginRound();
    if (slots.free > 0 && slots.runsWaiting) {
      const seen = slots.notices;
      // Only reserved slots left: light principals' runs only (see Slots.reserved).
      const lightOnly = slots.freeForAny === 0;
      const batchSize = lightOnly ? slots.free : slots.freeForAny;
      try {
        const jobs = await boss.fetch<RunJob>(RUN_QUEUE, {
          batchSize,
          includeMetadata: true,
          ...(lightOnly && { minPriority: priorityOfRank(slots.reserved - 1) }),
        });
        backoff = 100;
        if (jobs.length > 0) {
          slots.take(jobs.length);
          opts.track(runBatch(opts, jobs));
        }
        if (jobs.length === batchSize) continue; // maybe more waiting
        // Fewer light runs than reserved slots: the busy principals' runs (runsWaiting stays set) wait
        // for a slot to free, which pokes the loop.
        if (!lightOnly && slots.notices === seen) {
          slots.runsWaiting = false;
          dueAt = await dueTime(opts);
        }
      } catch (err) {
        log.warn('fetching runs failed', { error: coerceError(err).message });
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5_000);
        continue;
      }
    }
    // Until the next delayed run comes due, or the backstop poll (a wake-up may have been lost).
    const idleMs = Math.min(
      opts.pollIntervalMs,
      dueAt === undefined ? Infinity : Math.max(0, dueAt - Date.now()),
    );
    if (await slots.idle(idleMs)) {
      slots.runsWaiting = true;
      dueAt = undefined;
    }
  }
}

/** The next delayed run's due time (a few ms late, so that it is due when fetched), if one waits. */
async function dueTime(opts: FetchLoopOptions): Promise<number | undefined> {
  try {
    const ms = await opts.nextDelayedRun();
    return ms === undefined ? undefined : Date.now() + ms + 5;
  } catch (err) {
    opts.log.warn('reading the next delayed run failed', { error: coerceError(err).message });
    return undefined;
  }
}

/**
 * A fetched batch, its slots taken: its tasks claimed with one statement, its deliveries acknowledged
 * with one (while the legs run), then each claimed task's legs, or the settling of a delivery not claimed.
 */
async function runBatch(opts: FetchLoopOptions, jobs: JobWithMetadata<RunJob>[]): Promise<void> {
  const { boss, slots, log } = opts;
  const valid: { job: JobWithMetadata<RunJob>; taskId: string }[] = [];
  const invalid: string[] = [];
  for (const job of jobs) {
    const parsed = RunJobSchema.safeParse(job.data);
    if (parsed.success) valid.push({ job, taskId: parsed.data.taskId });
    else invalid.push(job.id);
  }
  const giveBack = async (ids: string[], err: unknown) => {
    if (ids.length === 0) return;
    slots.release(ids.length);
    // Infrastructure trouble (e.g. the database went away): pg-boss redelivers the jobs later.
    log.warn('runs failed before they settled', { jobs: ids.length, error: coerceError(err).message });
    await boss.fail(RUN_QUEUE, ids, { message: coerceError(err).message }).catch(() => {});
  };
  await giveBack(invalid, new Error('malformed run job'));
  const jobIds = valid.map((v) => v.job.id);
  let claims: (ClaimedTask | undefined)[];
  try {
    claims = await opts.claim(valid.map((v) => v.taskId));
  } catch (err) {
    await giveBack(jobIds, err);
    return;
  }
  // If the acknowledgement fails, pg-boss redelivers after the job's expiry and the claim refuses it.
  opts.track(
    boss.complete(RUN_QUEUE, jobIds).catch((err: unknown) =>
      log.warn('acknowledging runs failed; their redelivery will find the tasks claimed', {
        jobs: valid.length,
        error: coerceError(err).message,
      }),
    ),
  );
  valid.forEach(({ taskId }, i) => {
    const task = claims[i];
    if (task === undefined) opts.settleUnclaimed(taskId);
    else opts.runLegs(task);
  });
}
