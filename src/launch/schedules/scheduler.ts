import { coerceError } from '../../log.ts';
import type { ScheduleDefinition } from './define.ts';
import { firePass, type FiringDeps } from './fire.ts';
import { syncDeclaredSchedules } from './store.ts';

export interface SchedulerOptions extends FiringDeps {
  /** The tools module's schedules, synced to the database before the first pass. */
  declared: readonly ScheduleDefinition[];
  /**
   * Longest time between the end of a pass and the start of the next (SCHEDULE_POLL_INTERVAL_MS): a pass
   * starts sooner when the next tick comes due sooner (a schedule added elsewhere, a run-now request,
   * are seen within it).
   */
  intervalMs: number;
}

/** How long after a tick's time its pass starts: the hosts' and the database's clocks agree to about this. */
const TICK_MARGIN_MS = 5;

export interface Scheduler {
  /** Ends the loop after the pass under way. */
  stop(): Promise<void>;
}

/**
 * Syncs the declared schedules, then fires due ticks as they come due (at most `intervalMs` apart). Every process may run one:
 * firePass makes each tick's task once, whoever fires it, and a tick a dead process left half done is
 * finished by the next pass of any other.
 */
export async function startScheduler(opts: SchedulerOptions): Promise<Scheduler> {
  await syncDeclaredSchedules(opts.db, opts.declared);
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const pass = () => {
    running = firePass(opts)
      .catch((err: unknown) => {
        opts.log.warn('schedule pass failed', { error: coerceError(err).message });
        return undefined;
      })
      .then((untilNextMs) => {
        // At the next tick (a few ms after, so that it is due by the database's clock), not a poll later:
        // a tick's lag is then the pass's own time, not up to a whole interval. One still due right after
        // the pass (its pass failed) waits the interval: a failing schedule is not retried in a spin.
        const soon = untilNextMs !== undefined && untilNextMs > 0;
        const delayMs = soon ? Math.min(opts.intervalMs, untilNextMs + TICK_MARGIN_MS) : opts.intervalMs;
        if (!stopped) timer = setTimeout(pass, delayMs);
      });
  };
  pass();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
