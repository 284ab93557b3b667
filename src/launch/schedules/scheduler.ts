import { coerceError } from '../../log.ts';
import type { ScheduleDefinition } from './define.ts';
import { firePass, type FiringDeps } from './fire.ts';
import { syncDeclaredSchedules } from './store.ts';

export interface SchedulerOptions extends FiringDeps {
  /** The tools module's schedules, synced to the database before the first pass. */
  declared: readonly ScheduleDefinition[];
  /** Time between the end of a pass and the start of the next (SCHEDULE_POLL_INTERVAL_MS). */
  intervalMs: number;
}

export interface Scheduler {
  /** Ends the loop after the pass under way. */
  stop(): Promise<void>;
}

/**
 * Syncs the declared schedules, then fires due ticks every `intervalMs`. Every process may run one:
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
      .catch((err: unknown) => opts.log.warn('schedule pass failed', { error: coerceError(err).message }))
      .finally(() => {
        if (!stopped) timer = setTimeout(pass, opts.intervalMs);
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
