import type { Kysely } from 'kysely';
import type { Metrics } from '../core/metrics.ts';
import type { Database } from '../db/database.ts';
import { coerceError, type Logger } from '../log.ts';
import { checkLeases, LeaseLostError, renewLeases } from '../tasks/store/lease.ts';
import { startCancelGrace, type CancelGrace } from './cancel-grace.ts';
import { CancelRequestedError, type RunningAttempts } from './outcome.ts';

export interface LeaseKeeperOptions {
  db: Kysely<Database>;
  workerId: string;
  running: RunningAttempts;
  leaseMs: number;
  /** How often running attempts are checked for cancel and pause requests and lost leases. */
  cancelCheckIntervalMs: number;
  /** CANCEL_GRACE_MS: how long a stopped handler has to end before its cancelled task ends without it. */
  cancelGraceMs: number;
  metrics?: Metrics | undefined;
  log: Logger;
}

export interface LeaseKeeper {
  /** Checks now (one task, or all): cancel requests and lost leases stop their attempts. */
  check(only?: string): Promise<void>;
  /** Stopped legs still running past their grace: each holds its slot until its handler returns. */
  stuckLegs(): number;
  stop(): void;
}

/**
 * Keeps this worker's leases: renews them on their own timer (so that nothing can starve it), and
 * stops an attempt whose task was cancelled, or whose lease another attempt or the sweeper took. A
 * cancelled attempt whose handler ignores its abort signal ends `cancelled` after the grace (cancel-grace.ts).
 */
export function startLeaseKeeper(opts: LeaseKeeperOptions): LeaseKeeper {
  const grace = startCancelGrace({
    db: opts.db,
    running: opts.running,
    graceMs: opts.cancelGraceMs,
    retryMs: opts.cancelCheckIntervalMs,
    metrics: opts.metrics,
    log: opts.log,
  });
  const stop = attemptStopper(opts.running, grace);
  const check = leaseChecker(opts, stop);
  const checker = setInterval(() => {
    void check();
    grace.tick();
  }, opts.cancelCheckIntervalMs);
  const renewer = setInterval(leaseRenewer(opts, stop), opts.leaseMs / 3);
  return {
    check,
    stuckLegs: () => grace.stuckLegs(),
    stop() {
      clearInterval(checker);
      clearInterval(renewer);
      grace.stop();
    },
  };
}

type StopAttempt = (taskId: string, reason: Error) => void;

/** Stops a running attempt (its abort signal fires with `reason`) and has the grace watch it. */
function attemptStopper(running: RunningAttempts, grace: CancelGrace): StopAttempt {
  return (taskId, reason) => {
    const entry = running.get(taskId);
    if (entry === undefined) return;
    const cancelled = reason instanceof CancelRequestedError;
    // (An attempt stopped earlier for a lost lease that its worker then kept after all still ends by the
    // grace when a cancel comes: its handler may never have listened.)
    if (entry.abort.signal.aborted) {
      if (cancelled) grace.watch(taskId, entry, true);
      return;
    }
    entry.abort.abort(reason);
    grace.watch(taskId, entry, cancelled);
  };
}

/** The running attempts (one task's, or all), by task: their attempt numbers. */
function attemptsOf(running: RunningAttempts, only?: string): Map<string, number> {
  return new Map(
    [...running].filter(([id]) => only === undefined || id === only).map(([id, r]) => [id, r.attempt]),
  );
}

/**
 * LeaseKeeper.check: cancel requests and leases no longer held stop their attempts; pause requests are
 * passed to theirs (each pauses at its next checkpoint).
 */
function leaseChecker(
  { db, workerId, running, log }: LeaseKeeperOptions,
  stopAttempt: StopAttempt,
): LeaseKeeper['check'] {
  // Checks asked for while one runs are not dropped: one more check follows.
  let checking = false;
  let again = false;
  const check = async (only?: string): Promise<void> => {
    if (running.size === 0) return;
    if (checking) {
      again = true;
      return;
    }
    checking = true;
    try {
      for (const state of await checkLeases(db, workerId, attemptsOf(running, only))) {
        const entry = running.get(state.taskId);
        if (entry !== undefined) entry.pauseRequested = state.pauseRequested;
        // A cancel that already ended the task (2025-11-25 cancels at once) is a cancel, not a lost lease.
        if (state.cancelRequested) stopAttempt(state.taskId, new CancelRequestedError());
        else if (!state.held)
          stopAttempt(
            state.taskId,
            new LeaseLostError(state.taskId, running.get(state.taskId)?.attempt ?? 0),
          );
      }
    } catch (err) {
      log.warn('lease check failed', { error: coerceError(err).message });
    } finally {
      checking = false;
    }
    if (again) {
      again = false;
      await check();
    }
  };
  return check;
}

/** One renewal of all running attempts' leases (skipped while the last one still runs). */
function leaseRenewer(
  { db, workerId, running, leaseMs, log }: LeaseKeeperOptions,
  stopAttempt: StopAttempt,
): () => void {
  // A worker that cannot renew for most of a lease stops its attempts: past the lease another worker
  // may already run them.
  let lastRenewed = Date.now();
  let renewing = false;
  return () => {
    if (renewing) return;
    if (running.size === 0) {
      lastRenewed = Date.now();
      return;
    }
    renewing = true;
    const attempts = attemptsOf(running);
    renewLeases(db, workerId, attempts, leaseMs)
      .then((renewed) => {
        lastRenewed = Date.now();
        for (const [taskId, attempt] of attempts) {
          if (!renewed.has(taskId)) stopAttempt(taskId, new LeaseLostError(taskId, attempt));
        }
      })
      .catch((err: unknown) => {
        log.warn('lease renewal failed', { error: coerceError(err).message });
        if (Date.now() - lastRenewed > leaseMs * 0.8) {
          for (const [taskId, attempt] of attempts) stopAttempt(taskId, new LeaseLostError(taskId, attempt));
        }
      })
      .finally(() => (renewing = false));
  };
}
