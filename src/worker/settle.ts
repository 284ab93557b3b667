import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { ProtocolErrorCode } from '../core/errors.ts';
import { isStorable } from '../core/limits.ts';
import { settleCancelRequest, type Finish } from '../tasks/store/finish.ts';
import { readSignal } from '../tasks/store/signals.ts';
import { mapSettled } from '../tasks/store/maps.ts';
import { childrenSettled, wakeSpawner } from '../tasks/store/children.ts';
import { releaseTask, type ClaimedTask } from '../tasks/store/lease.ts';
import { attemptError, recordAttemptEnd, type AttemptEnd } from '../tasks/store/attempt-ends.ts';
import { pauseAttempt } from '../tasks/store/pause.ts';
import { settlePauseRequest } from '../tasks/store/owner-pause.ts';
import { hasSteeringAfter } from '../tasks/store/steering.ts';
import type { LegDeps, LegScope } from './leg-deps.ts';
import type { ParkedOn } from './leg-stops.ts';
import { completeItem, wakeParent } from './map-item.ts';
import type { LegOutcome } from './outcome.ts';

type Outcome<K extends LegOutcome['kind']> = Extract<LegOutcome, { kind: K }>;

/**
 * Applies a leg's outcome to its task: one fenced write, or a hand-back to the queue. Returns the leg
 * this slot runs next: a map item's successor, or its parent woken.
 */
export async function settle(
  deps: LegDeps,
  leg: LegScope,
  outcome: LegOutcome,
): Promise<ClaimedTask | undefined> {
  const { task, log, tool } = leg;
  const { metrics } = deps;
  const ended = (end: AttemptEnd) => recordAttemptEnd(deps.db, task.taskId, task.attempt, end);
  switch (outcome.kind) {
    case 'completed': {
      const landed = await finish(deps, leg, {
        status: 'completed',
        result: { ...outcome.result, resultType: 'complete' },
        ...(outcome.statusMessage !== undefined && { statusMessage: outcome.statusMessage }),
      });
      if (!landed) log.info('attempt lost its lease before completing; result dropped');
      return undefined;
    }
    case 'item_done':
      return completeItem(deps, task, outcome.value);
    case 'failed':
      return settleFailure(deps, leg, outcome);
    case 'cancelled':
      metrics?.cancelsDelivered.inc(tool);
      await finish(deps, leg, { status: 'cancelled', statusMessage: 'Cancelled by request' });
      return undefined;
    case 'paused':
      await settlePause(deps, leg, outcome);
      return undefined;
    case 'input_required':
      leg.span.addEvent('input_required');
      await ended({ outcome: 'input_required' });
      return undefined;
    case 'lease_lost':
      metrics?.leasesLost.inc(tool);
      await ended({ outcome: 'lease_lost' });
      if (!(await settleCancelRequest(deps.db, task.taskId))) log.info('attempt stopped: lease lost');
      return undefined;
    case 'parked':
    case 'handed_back':
    case 'infrastructure_retry':
    case 'crash_retry':
      await settleHandBack(deps, leg, outcome);
      return undefined;
  }
}

/** The terminal write of a leg's task; counted once, by the worker whose fenced write it was. */
async function finish(deps: LegDeps, leg: LegScope, f: Finish['outcome'], crash?: Error): Promise<boolean> {
  const { task, tool } = leg;
  const landed = await deps.writes.finish({
    taskId: task.taskId,
    attempt: task.attempt,
    outcome: f,
    crash: crash && attemptError(crash),
  });
  if (landed) deps.metrics?.tasksFinished.inc({ ...tool, status: f.status });
  // A child's end wakes its parent (a join waiting for it reads it then).
  const { spawnedBy } = task;
  if (landed && spawnedBy !== undefined) {
    await deps.db.transaction().execute((trx) => wakeSpawner(trx, deps.queue, spawnedBy));
  }
  return landed;
}

/** A failure for good: the task ends `failed`; a map item's parent wakes now and fails its map. */
async function settleFailure(
  deps: LegDeps,
  leg: LegScope,
  outcome: Outcome<'failed'>,
): Promise<ClaimedTask | undefined> {
  // A tool's own error may hold what Postgres cannot store (NUL, lone surrogates) or cannot serialize:
  // then the generic error is stored, rather than a write that fails forever.
  const wire = outcome.error.toJSON();
  const storable = isStorable(wire) && isStorable(outcome.statusMessage) && serializable(wire);
  const landed = await finish(
    deps,
    leg,
    {
      status: 'failed',
      error: storable ? wire : { code: ProtocolErrorCode.InternalError, message: 'Internal error' },
      statusMessage: storable ? outcome.statusMessage : 'Tool execution failed',
    },
    outcome.crash,
  );
  // (Logged once written: a log line never tells of a write a crash could still take back.)
  if (!landed) leg.log.info('attempt lost its lease before failing');
  else if (outcome.crash !== undefined) logCrash(leg, outcome.crash, 'failed');
  const item = leg.task.mapItem;
  return item === undefined
    ? undefined
    : wakeParent(deps, { parentTaskId: item.parentTaskId, mapName: item.mapName });
}

/** Attempts ran out under `onExhausted: 'pause'`: the task stays `working`, released, until resumed. */
async function settlePause(deps: LegDeps, leg: LegScope, outcome: Outcome<'paused'>): Promise<void> {
  const paused = await pauseAttempt(deps.db, leg.task.taskId, leg.task.attempt, {
    statusMessage: outcome.statusMessage,
    error: attemptError(outcome.crash),
  });
  if (!paused) leg.log.info('attempt lost its lease before pausing');
  else logCrash(leg, outcome.crash, 'paused');
}

/** What became of a crashed attempt's task, for its log line. */
type CrashEnding = 'retried' | 'failed' | 'paused';

const CRASH_ENDINGS: Record<CrashEnding, string> = {
  retried: 'the task will be retried',
  failed: 'no retries left',
  paused: 'no attempts left: the task is paused until an operator resumes it',
};

/**
 * A crash, once its outcome is written: "handler crashed; …" for a task, "map item 3 of "rows" failed;
 * …" for a map item (a warning: the map's task decides what the item's failure means, and says so).
 */
function logCrash(leg: LegScope, crash: Error, ending: CrashEnding): void {
  const item = leg.task.mapItem;
  const fields = { failures: leg.task.failures + 1, error: crash.message, stack: crash.stack };
  if (item !== undefined) {
    const then = ending === 'failed' ? 'no retries left: its map fails' : 'the item will be retried';
    leg.log.warn(`map item ${item.index} of "${item.mapName}" failed; ${then}`, fields);
  } else if (ending === 'failed') {
    leg.log.error(`handler crashed; ${CRASH_ENDINGS[ending]}`, fields);
  } else {
    leg.log.warn(`handler crashed; ${CRASH_ENDINGS[ending]}`, fields);
  }
}

/** The outcomes that run the task again later: released, and its next run queued (handBack). */
async function settleHandBack(
  deps: LegDeps,
  leg: LegScope,
  outcome: Outcome<'parked' | 'handed_back' | 'infrastructure_retry' | 'crash_retry'>,
): Promise<void> {
  const { task, log, tool } = leg;
  switch (outcome.kind) {
    case 'parked':
      await handBack(deps, task, {
        failed: false,
        delayMs: Math.max(0, outcome.until.getTime() - Date.now()),
        statusMessage: outcome.statusMessage,
        parkedOn: outcome.parkedOn,
        ended: { outcome: 'parked' },
      });
      leg.span.addEvent('parked', { until: outcome.until.toISOString() });
      return;
    case 'handed_back': {
      const handed = await handBack(deps, task, {
        failed: false,
        delayMs: 0,
        ended: { outcome: 'handed_back' },
      });
      if (handed === 'paused') log.info('paused at a checkpoint: its owner asked');
      else log.info('handed the task back: the worker shuts down (or a pause its owner withdrew)');
      return;
    }
    case 'infrastructure_retry':
      log.warn('a store operation failed mid-run; the task will be retried', {
        error: outcome.error.message,
      });
      await handBack(deps, task, {
        failed: false,
        delayMs: deps.retryDefaults.initialMs,
        ended: { outcome: 'infrastructure_retry', error: attemptError(outcome.error) },
      });
      return;
    case 'crash_retry': {
      deps.metrics?.crashRetries.inc(tool);
      const handed = await handBack(deps, task, {
        failed: true,
        delayMs: outcome.delayMs,
        ended: { outcome: 'crash_retry', error: attemptError(outcome.error) },
      });
      if (handed === 'queued') logCrash(leg, outcome.error, 'retried');
      else if (handed === 'paused') log.info('handler crashed; its owner paused the task: no retry queued');
      else if (handed === 'lost') log.info('attempt lost its lease before its retry was queued');
      return;
    }
  }
}

/**
 * Releases the task (still `working`) and enqueues its next run after `delayMs`, in one transaction; the
 * pool is asked to fetch again when it comes due. What came of it: the run queued, the task cancelled
 * or paused instead (a cancel, or its owner's pause, asked for while the attempt held it), or nothing
 * (the attempt no longer held it).
 */
export async function handBack(
  deps: Pick<LegDeps, 'db' | 'queue' | 'scheduleWake'>,
  task: ClaimedTask,
  opts: {
    failed: boolean;
    delayMs: number;
    statusMessage?: string;
    parkedOn?: ParkedOn | undefined;
    /** How this attempt ended, for its row (the operator's view). */
    ended?: AttemptEnd;
  },
): Promise<'queued' | 'cancelled' | 'paused' | 'lost'> {
  let delayMs = opts.delayMs;
  const handed = await deps.db.transaction().execute(async (trx) => {
    if (!(await releaseTask(trx, task.taskId, task.attempt, opts))) return 'lost' as const;
    if (opts.ended !== undefined) await recordAttemptEnd(trx, task.taskId, task.attempt, opts.ended);
    // A cancel asked for while this attempt held the task ends it now, not when the run comes due.
    if (await settleCancelRequest(trx, task.taskId)) return 'cancelled' as const;
    // A pause its owner asked for meanwhile (tasks/pause) takes effect now: no run is queued.
    if (await settlePauseRequest(trx, task.taskId)) return 'paused' as const;
    // A delivery (or a map's last item) that came after the wait looked, while this attempt still held
    // the task, had its wake-up turned away by the lease: the task runs again now. (One that commits
    // later brings its own run, whose claim waits for this transaction's row lock and then finds the
    // task released.)
    if (opts.parkedOn !== undefined && (await parkedOnIsDone(trx, task.taskId, opts.parkedOn))) delayMs = 0;
    await deps.queue.enqueueRun(trx, task.taskId, { delayMs });
    return 'queued' as const;
  });
  if (handed === 'queued' && delayMs > 0) deps.scheduleWake?.(delayMs);
  return handed;
}

async function parkedOnIsDone(db: Kysely<Database>, taskId: string, on: ParkedOn): Promise<boolean> {
  if ('signal' in on) return (await readSignal(db, taskId, on.signal))?.deliveredAt != null;
  if ('steering' in on) return hasSteeringAfter(db, taskId, on.steering);
  if ('children' in on) return childrenSettled(db, taskId, on.children, on.mode);
  return mapSettled(db, { parentTaskId: taskId, mapName: on.map });
}

function serializable(value: unknown): boolean {
  try {
    JSON.stringify(value);
    return true;
  } catch {
    return false;
  }
}
