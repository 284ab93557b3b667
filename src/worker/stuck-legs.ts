import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { coerceError, type Logger } from '../log.ts';
import { renewStuckMarks, setLegStuck, STUCK_MARK_RENEW_MS } from '../tasks/store/attempt-ends.ts';
import type { RunningAttempts } from './outcome.ts';

/** An attempt the lease keeper stopped: its task, its number, and the controller whose abort signal fired. */
export interface Stopped {
  taskId: string;
  attempt: number;
  abort: AbortController;
}

/** The attempt's entry stays in `running` until its leg has settled (leg.ts): still there, still running. */
export function stillRuns(running: RunningAttempts, s: Stopped): boolean {
  return running.get(s.taskId)?.abort === s.abort;
}

interface Stuck extends Stopped {
  /** When it was found stuck. */
  since: number;
  /** Its attempt row's stuck mark, written in order (set, then cleared). */
  writes: Promise<void>;
}

export interface StuckLegsOptions {
  db: Kysely<Database>;
  running: RunningAttempts;
  /** CANCEL_GRACE_MS, for the warning. */
  graceMs: number;
  log: Logger;
}

/**
 * Stopped legs still running past their grace, each holding its slot until its handler returns: counted
 * (the stuck-legs gauge), warned of once, and marked on their attempt rows for the dashboard, the marks
 * renewed every STUCK_MARK_RENEW_MS (a mark its worker stops renewing lapses) and cleared when the
 * handler returns.
 */
export class StuckLegs {
  readonly #opts: StuckLegsOptions;
  readonly #stuck = new Map<AbortController, Stuck>();
  #renewedAt = Date.now();

  constructor(opts: StuckLegsOptions) {
    this.#opts = opts;
  }

  /** A stopped leg found still running past its grace; `markRow` unless its row is marked already. */
  found(s: Stopped, markRow: boolean): void {
    if (this.#stuck.has(s.abort)) return;
    const entry: Stuck = { ...s, since: Date.now(), writes: Promise.resolve() };
    this.#stuck.set(s.abort, entry);
    if (markRow) this.#mark(entry, true);
    if (!stillRuns(this.#opts.running, s)) return;
    this.#opts.log.warn(
      'handler still running after its signal fired and the grace passed; its slot stays taken',
      { taskId: s.taskId, attempt: s.attempt, graceMs: this.#opts.graceMs },
    );
  }

  /** How many are still stuck (those that ended are let go first). */
  count(): number {
    this.#prune();
    return this.#stuck.size;
  }

  /** Lets go of those that ended, and renews the marks of the rest when due. */
  tick(): void {
    this.#prune();
    this.#renew();
  }

  #prune(): void {
    for (const [abort, s] of this.#stuck) {
      if (stillRuns(this.#opts.running, s)) continue;
      this.#stuck.delete(abort);
      this.#mark(s, false);
      this.#opts.log.info('a stuck leg ended; its slot is free', {
        taskId: s.taskId,
        stuckMs: Date.now() - s.since,
      });
    }
  }

  #renew(): void {
    if (Date.now() - this.#renewedAt < STUCK_MARK_RENEW_MS) return;
    this.#renewedAt = Date.now();
    const legs = [...this.#stuck.values()].map(({ taskId, attempt }) => ({ taskId, attempt }));
    renewStuckMarks(this.#opts.db, legs).catch((err: unknown) =>
      this.#opts.log.warn("renewing stuck legs' marks failed", { error: coerceError(err).message }),
    );
  }

  /** The attempt row's stuck mark: for the dashboard, so a failed write is logged, not retried. */
  #mark(s: Stuck, isStuck: boolean): void {
    s.writes = s.writes
      .then(() => setLegStuck(this.#opts.db, s.taskId, s.attempt, isStuck))
      .catch((err: unknown) =>
        this.#opts.log.warn('recording a stuck leg failed', {
          taskId: s.taskId,
          error: coerceError(err).message,
        }),
      );
  }
}
