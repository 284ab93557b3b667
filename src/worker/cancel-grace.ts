import type { Kysely } from 'kysely';
import type { Metrics } from '../core/metrics.ts';
import type { Database } from '../db/database.ts';
import { coerceError, type Logger } from '../log.ts';
import { renewStuckMarks, setLegStuck, STUCK_MARK_RENEW_MS } from '../tasks/store/attempt-ends.ts';
import { cancelAfterGrace } from '../tasks/store/cancel.ts';
import type { RunningAttempts } from './outcome.ts';

export interface CancelGraceOptions {
  db: Kysely<Database>;
  running: RunningAttempts;
  /** CANCEL_GRACE_MS: how long a stopped handler has to end before its task is cancelled without it. */
  graceMs: number;
  /** When the cancelling write fails (the database is away), how soon it is tried again. */
  retryMs: number;
  metrics?: Metrics | undefined;
  log: Logger;
}

export interface CancelGrace {
  /**
   * An attempt whose signal just fired: a cancel (`cancelled`) or a lost lease. Past the grace, a
   * cancelled task becomes `cancelled` even if its handler still runs, and a leg still running is stuck.
   */
  watch(taskId: string, entry: { attempt: number; abort: AbortController }, cancelled: boolean): void;
  /** Legs still running past their grace (each holds its slot until its handler returns). */
  stuckLegs(): number;
  /** Notices stuck legs that ended, and renews the marks of those still stuck (every STUCK_MARK_RENEW_MS). */
  tick(): void;
  stop(): void;
}

interface Stopped {
  taskId: string;
  attempt: number;
  abort: AbortController;
}

interface Stuck extends Stopped {
  /** When it was found stuck. */
  since: number;
  /** Its attempt row's stuck mark, written in order (set, then cleared). */
  writes: Promise<void>;
}

/**
 * What becomes of an attempt the lease keeper stopped (lease-keeper.ts), once CANCEL_GRACE_MS has
 * passed: a handler that ignores ctx.signal no longer keeps its task `working`, and a leg that never
 * ends is visible (a warning, the stuck-legs gauge, its attempt row for the dashboard) instead of a slot
 * silently gone.
 */
export function startCancelGrace(opts: CancelGraceOptions): CancelGrace {
  const { db, running, graceMs, metrics, log } = opts;
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  /** Attempts whose cancel is watched already (a cancel is seen again at every check until it ends). */
  const cancels = new WeakSet<AbortController>();
  const stuck = new Map<AbortController, Stuck>();
  // The attempt's entry stays in `running` until its leg has settled (leg.ts): still there, still running.
  const runs = (s: Stopped) => running.get(s.taskId)?.abort === s.abort;
  const after = (s: Stopped, ms: number, then: (s: Stopped) => Promise<void>) => {
    if (stopped) return;
    const timer = setTimeout(() => {
      timers.delete(timer);
      void then(s);
    }, ms);
    timer.unref();
    timers.add(timer);
  };
  /** The attempt row's stuck mark: for the dashboard, so a failed write is logged, not retried. */
  const mark = (s: Stuck, isStuck: boolean) => {
    s.writes = s.writes
      .then(() => setLegStuck(db, s.taskId, s.attempt, isStuck))
      .catch((err: unknown) =>
        log.warn('recording a stuck leg failed', { taskId: s.taskId, error: coerceError(err).message }),
      );
  };

  /** One fenced write; counted once, by the worker whose write it was (the leg's own will not land). */
  const cancel = async (s: Stopped): Promise<void> => {
    if (!runs(s)) return;
    let ended: { toolName: string } | undefined;
    try {
      ended = await cancelAfterGrace(db, s.taskId, s.attempt, graceMs);
    } catch (err) {
      log.warn('cancelling a task past its grace failed; trying again', {
        taskId: s.taskId,
        error: coerceError(err).message,
      });
      after(s, opts.retryMs, cancel);
      return;
    }
    if (ended !== undefined) metrics?.tasksFinished.inc({ tool: ended.toolName, status: 'cancelled' });
    if (ended === undefined && !runs(s)) return; // (the leg settled the task itself meanwhile)
    // The cancelling write marked the row stuck; a handler that returned meanwhile is pruned (cleared) next.
    found(s, ended === undefined);
  };
  const found = (s: Stopped, markRow: boolean) => {
    if (stuck.has(s.abort)) return;
    const entry: Stuck = { ...s, since: Date.now(), writes: Promise.resolve() };
    stuck.set(s.abort, entry);
    if (markRow) mark(entry, true);
    if (!runs(s)) return;
    log.warn('handler still running after its signal fired and the grace passed; its slot stays taken', {
      taskId: s.taskId,
      attempt: s.attempt,
      graceMs,
    });
  };
  let renewedAt = Date.now();
  const renew = () => {
    if (Date.now() - renewedAt < STUCK_MARK_RENEW_MS) return;
    renewedAt = Date.now();
    const legs = [...stuck.values()].map(({ taskId, attempt }) => ({ taskId, attempt }));
    renewStuckMarks(db, legs).catch((err: unknown) =>
      log.warn("renewing stuck legs' marks failed", { error: coerceError(err).message }),
    );
  };
  const prune = () => {
    for (const [abort, s] of stuck) {
      if (runs(s)) continue;
      stuck.delete(abort);
      mark(s, false);
      log.info('a stuck leg ended; its slot is free', { taskId: s.taskId, stuckMs: Date.now() - s.since });
    }
  };

  return {
    watch(taskId, { attempt, abort }, cancelled) {
      if (cancelled && cancels.has(abort)) return;
      if (cancelled) cancels.add(abort);
      after({ taskId, attempt, abort }, graceMs, async (s) => {
        if (cancelled) await cancel(s);
        else if (runs(s)) found(s, true);
      });
    },
    stuckLegs() {
      prune();
      return stuck.size;
    },
    tick() {
      prune();
      renew();
    },
    stop() {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}
