import { coerceError } from '../log.ts';
import { nextWaitingForKey } from '../tasks/store/claim.ts';
import { settleCancelRequest } from '../tasks/store/finish.ts';
import { failIfTimedOut } from '../tasks/store/timeout.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import { runTaskLeg } from './leg.ts';
import type { LegDeps } from './leg-deps.ts';
import type { Slots } from './slots.ts';

/** What a slot already taken (for a delivery, or a task created here) holds until it is given back. */
export interface SlotWork {
  /**
   * Runs a claimed task's leg (once `after` resolves), then each leg it hands on (a map's next item, or
   * its woken parent).
   */
  readonly runLegs: (task: ClaimedTask, after?: Promise<void>) => void;
  /** A delivery whose task was not claimed: no leg runs, but a cancel asked for while queued is settled. */
  readonly settleUnclaimed: (taskId: string) => void;
}

/** The pool's slot work: each piece is tracked (stop() waits for it) and gives its slot back at the end. */
export function createSlotWork(
  deps: LegDeps,
  slots: Slots,
  track: (work: Promise<unknown>) => void,
): SlotWork {
  const inSlot = (taskId: string, work: Promise<void>) =>
    track(
      work
        .catch((err: unknown) =>
          deps.log.warn('run failed before it settled', { taskId, error: coerceError(err).message }),
        )
        .finally(() => slots.release()),
    );
  return {
    runLegs: (task, after = Promise.resolve()) => {
      inSlot(
        task.taskId,
        after.then(() => runLegChain(deps, task)),
      );
    },
    settleUnclaimed: (taskId) => inSlot(taskId, settleUnclaimed(deps, taskId)),
  };
}

/** A claimed task's leg and the legs it hands on, one after another in the same slot. */
async function runLegChain(deps: LegDeps, task: ClaimedTask): Promise<void> {
  let next;
  try {
    next = await runTaskLeg(deps, task);
  } finally {
    if (task.concurrencyKey !== undefined) await wakeNextForKey(deps, task.concurrencyKey);
  }
  while (next !== undefined) next = await runTaskLeg(deps, next);
}

/**
 * A delivery whose task the claim refused runs no leg: the task is finished, waiting for input, held by a
 * live attempt, past its timeoutMs, or was cancelled while queued. The last two are settled here
 * (`failed`, `cancelled`); the guarded writes change nothing for the others.
 */
async function settleUnclaimed(deps: LegDeps, taskId: string): Promise<void> {
  if (await failIfTimedOut(deps.db, taskId)) return;
  await settleCancelRequest(deps.db, taskId);
}

/** A leg with a concurrency key ended: the oldest task waiting for its place gets a run. */
async function wakeNextForKey(deps: LegDeps, key: string): Promise<void> {
  await deps.db
    .transaction()
    .execute(async (trx) => {
      const waiting = await nextWaitingForKey(trx, key);
      if (waiting !== undefined) await deps.queue.enqueueRun(trx, waiting);
    })
    // The sweeper redelivers a waiting task past its claim deadline: the backstop.
    .catch((err: unknown) =>
      deps.log.warn('waking a task waiting for its key failed', { error: coerceError(err).message }),
    );
}
