import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { Logger } from '../log.ts';
import { setStatusMessage } from '../tasks/store/finish.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';

/** ctx.status of one attempt, and what its leg does with a message still waiting to be written. */
export interface AttemptStatus {
  readonly set: (message: string) => void;
  /** Writes the waiting status message now. */
  readonly flush: () => Promise<void>;
  /** Takes the waiting status message instead of writing it (the caller writes it with its own update). */
  readonly takePending: () => Promise<string | undefined>;
}

export interface StatusWriterOptions {
  db: Kysely<Database>;
  task: ClaimedTask;
  statusThrottleMs: number;
  log: Logger;
}

/** A map item's replay: the parent's status messages are the parent's own legs' business. */
export function silentStatus(): AttemptStatus {
  return {
    set: () => {},
    flush: () => Promise.resolve(),
    takePending: () => Promise.resolve(undefined),
  };
}

/** statusMessage writes at most once per `statusThrottleMs`; the latest message always lands. */
export function throttledStatus({ db, task, statusThrottleMs, log }: StatusWriterOptions): AttemptStatus {
  let pending: string | undefined;
  // The first message waits its turn too: a short task's only message is then written with its completion.
  let lastWrite = Date.now();
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();

  const write = () => {
    timer = undefined;
    if (pending === undefined) return;
    const message = pending;
    pending = undefined;
    lastWrite = Date.now();
    inFlight = inFlight
      .then(() => setStatusMessage(db, task.taskId, task.attempt, message))
      .catch((err: unknown) => log.warn('statusMessage write failed', { error: String(err) }));
  };

  return {
    set: (message: string) => {
      pending = message;
      if (timer !== undefined) return;
      const wait = lastWrite + statusThrottleMs - Date.now();
      if (wait <= 0) write();
      else timer = setTimeout(write, wait);
    },
    flush: async () => {
      if (timer !== undefined) clearTimeout(timer);
      write();
      await inFlight;
    },
    takePending: async () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      const message = pending;
      pending = undefined;
      await inFlight;
      return message;
    },
  };
}
