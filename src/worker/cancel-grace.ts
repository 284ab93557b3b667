import type { Kysely } from 'kysely';
import type { Metrics } from '../core/metrics.ts';
import type { Database } from '../db/database.ts';
import { coerceError, type Logger } from '../log.ts';
import { cancelAfterGrace } from '../tasks/store/cancel.ts';
import type { RunningAttempts } from './outcome.ts';
import { stillRuns, StuckLegs, type Stopped } from './stuck-legs.ts';

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

/**
 * What becomes of an attempt the lease keeper stopped (lease-keeper.ts), once CANCEL_GRACE_MS has
 * passed: a handler that ignores ctx.signal no longer keeps its task `working`, and a leg that never
 * ends is visible (stuck-legs.ts) instead of a slot silently gone.
 */
export function startCancelGrace(opts: CancelGraceOptions): CancelGrace {
  const timers = new Timers();
  /** Attempts whose cancel is watched already (a cancel is seen again at every check until it ends). */
  const cancels = new WeakSet<AbortController>();
  const stuck = new StuckLegs(opts);
  const cancel = (s: Stopped): Promise<void> =>
    cancelPastGrace(opts, s, {
      stuck,
      retry: () => timers.after(opts.retryMs, () => cancel(s)),
    });
  return {
    watch(taskId, { attempt, abort }, cancelled) {
      if (cancelled && cancels.has(abort)) return;
      if (cancelled) cancels.add(abort);
      const s: Stopped = { taskId, attempt, abort };
      timers.after(opts.graceMs, async () => {
        if (cancelled) await cancel(s);
        else if (stillRuns(opts.running, s)) stuck.found(s, true);
      });
    },
    stuckLegs: () => stuck.count(),
    tick: () => stuck.tick(),
    stop: () => timers.stop(),
  };
}

/**
 * A cancelled attempt past its grace: its task ends `cancelled` with one fenced write, counted once, by
 * the worker whose write it was (the leg's own will not land). When the write fails (the database is
 * away), `retry` is called.
 */
async function cancelPastGrace(
  { db, running, graceMs, metrics, log }: CancelGraceOptions,
  s: Stopped,
  { stuck, retry }: { stuck: StuckLegs; retry: () => void },
): Promise<void> {
  if (!stillRuns(running, s)) return;
  let ended: { toolName: string } | undefined;
  try {
    ended = await cancelAfterGrace(db, s.taskId, s.attempt, graceMs);
  } catch (err) {
    log.warn('cancelling a task past its grace failed; trying again', {
      taskId: s.taskId,
      error: coerceError(err).message,
    });
    retry();
    return;
  }
  if (ended !== undefined) metrics?.tasksFinished.inc({ tool: ended.toolName, status: 'cancelled' });
  if (ended === undefined && !stillRuns(running, s)) return; // (the leg settled the task itself meanwhile)
  // The cancelling write marked the row stuck; a handler that returned meanwhile is pruned (cleared) next.
  stuck.found(s, ended === undefined);
}

/** The grace's timers: unref'd (they never keep the process up), all cleared at stop, none set after. */
class Timers {
  readonly #timers = new Set<NodeJS.Timeout>();
  #stopped = false;

  after(ms: number, then: () => Promise<void>): void {
    if (this.#stopped) return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      void then();
    }, ms);
    timer.unref();
    this.#timers.add(timer);
  }

  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }
}
