// ctx.createSignal and ctx.waitForSignal in a task's attempt: a signal is created once (its token is a
// step's value), and a wait for one not yet delivered parks the task until its timeout or its delivery.
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { ContextBackend } from '../tools/context.ts';
import { createSignal, newSignalToken, readSignal, type SignalStepValue } from '../tasks/store/signals.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import { signalStepName, type StepHistory } from '../tasks/store/steps.ts';
import type { AttemptStatus } from './attempt-status.ts';
import { infra, Park } from './leg-stops.ts';
import { ReplayMissError } from './step-guard.ts';

/** A wait with no deadline of its own looks again this often (its signal's delivery wakes it sooner). */
export const PARKED_RECHECK_MS = 24 * 3_600_000;

export interface AttemptSignalsOptions {
  db: Kysely<Database>;
  task: ClaimedTask;
  /** What earlier legs recorded: signals delivered before this leg began among it. */
  steps: StepHistory;
  signal: AbortSignal;
  step: ContextBackend['step'];
  status: AttemptStatus;
  /** A map item's leg: a wait its parent never saw end is a ReplayMissError. */
  replayOnly: boolean;
  /** A signal's delivery URL, from its token. */
  signalUrl: (token: string) => string;
}

/** `ctx.createSignal` and `ctx.waitForSignal` of one attempt. */
export function createAttemptSignals(
  opts: AttemptSignalsOptions,
): Pick<ContextBackend, 'createSignal' | 'waitForSignal'> {
  const { db, task, step } = opts;
  return {
    async createSignal(name, { timeoutMs } = {}) {
      // Created once: a replay gets the same token back from the step.
      const created = await step(signalStepName(name), async (): Promise<SignalStepValue> => {
        const token = newSignalToken();
        const timeoutAt = await createSignal(db, {
          taskId: task.taskId,
          attempt: task.attempt,
          name,
          token,
          timeoutMs,
        }).catch(infra);
        return { token, timeoutAt: timeoutAt?.toISOString() ?? null };
      });
      return {
        name,
        token: created.token,
        url: opts.signalUrl(created.token),
        timeoutAt: created.timeoutAt === null ? null : new Date(created.timeoutAt),
      };
    },
    waitForSignal: (handle, waitOpts = {}) => waitForSignal(opts, handle.name, waitOpts.statusMessage),
  };
}

/** A signal's payload once delivered, or its timeout once past; otherwise the task parks until either. */
async function waitForSignal(
  { db, task, steps, signal, status, replayOnly }: AttemptSignalsOptions,
  name: string,
  statusMessage: string | undefined,
): ReturnType<ContextBackend['waitForSignal']> {
  // Delivered before this leg began: read with the steps (see loadStepHistory).
  if (steps.deliveredSignals.has(name)) {
    return { status: 'delivered', payload: steps.deliveredSignals.get(name) };
  }
  const state = await readSignal(db, task.taskId, name).catch(infra);
  if (state === undefined) throw new Error(`no signal ${name} was created in this task (ctx.createSignal)`);
  if (state.deliveredAt !== null) return { status: 'delivered', payload: state.payload };
  if (state.timeoutAt !== null && state.timeoutAt <= state.now) return { status: 'timed_out' };
  if (replayOnly) throw new ReplayMissError(`a wait for signal "${name}"`);
  signal.throwIfAborted();
  await status.flush();
  // Until the timeout (by this clock: the wake-up reads the database's again), or a daily look.
  const recheck = Date.now() + PARKED_RECHECK_MS;
  const until =
    state.timeoutAt === null
      ? recheck
      : Math.min(recheck, Date.now() + (state.timeoutAt.getTime() - state.now.getTime()));
  throw new Park(new Date(until), statusMessage ?? `Waiting for signal ${name}`, {
    signal: name,
  });
}
