import type { FiringDeps } from '../launch/schedules/fire.ts';
import { startScheduler } from '../launch/schedules/scheduler.ts';
import type { CleanupStack } from './cleanups.ts';
import type { StartupRetry } from './queue.ts';
import type { ProcessOptions } from './start.ts';

/**
 * The firing loop of schedules (every role: each tick still makes one task), after syncing the
 * declared ones; none with SCHEDULE_POLL_INTERVAL_MS=0.
 */
export async function startSchedules(
  parts: Pick<FiringDeps, 'db' | 'tasks' | 'tools' | 'metrics'>,
  { config, log, schedules }: ProcessOptions,
  retry: StartupRetry,
  cleanups: CleanupStack,
): Promise<void> {
  if (config.SCHEDULE_POLL_INTERVAL_MS === 0) return;
  const scheduler = await retry('schedules', () =>
    startScheduler({
      ...parts,
      declared: schedules ?? [],
      intervalMs: config.SCHEDULE_POLL_INTERVAL_MS,
      misfireMs: config.SCHEDULE_MISFIRE_MS,
      taskDefaults: { ttlMs: config.TASK_TTL_MS, pollIntervalMs: config.TASK_POLL_INTERVAL_MS },
      maxArgumentsBytes: config.MAX_ARGUMENTS_BYTES,
      log,
    }),
  );
  cleanups.push(() => scheduler.stop());
}
