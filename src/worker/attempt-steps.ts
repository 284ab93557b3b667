// A task's durable steps in one attempt: checkpointed values replayed by name, their order checked (the
// determinism guard, step-guard.ts), their own retry policies and timeouts, and ctx.patched for changing
// code safely.
import { setTimeout as delay } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import { activeOr, inSpan, ROOT_CONTEXT, type TraceContext } from '../core/tracing.ts';
import type { Database } from '../db/database.ts';
import { coerceError } from '../log.ts';
import { LeaseLostError, type ClaimedTask } from '../tasks/store/lease.ts';
import {
  recordStepFailure,
  startStepAttempt,
  type StepHistory,
  type StepRecord,
} from '../tasks/store/steps.ts';
import {
  callStep,
  nextRetryDelay,
  NonRetryableError,
  resolveRetry,
  StepFailedError,
  type ResolvedRetry,
  type StepFn,
  type StepOptions,
} from '../tools/retry.ts';
import { HandBack, infra, InfrastructureError, MapItemDone, Park, SuspendForInput } from './leg-stops.ts';
import { inStepBody } from './attempt-events.ts';
import { NonDeterminismError, ReplayMissError, stepGuard } from './step-guard.ts';

/**
 * The steps under which a durable sleep records its deadline and a patch its marker (names of their own;
 * a signal's, signalStepName, is the store's: a leg reads its delivery with it).
 */
export const sleepStepName = (name: string) => `sleep:${name}`;
export const patchStepName = (id: string) => `patch:${id}`;

/** A step's own retries back off in the slot up to this long; a longer backoff parks the task. */
export const STEP_BACKOFF_IN_SLOT_MS = 2_000;

/** What a step's retry policy leaves unsaid: one attempt unless it says more, backoff from 1 s. */
const NO_STEP_RETRY = { maxAttempts: 1, initialMs: 1_000, factor: 2, maxMs: 60_000 };

/** What a step's function threw, as opposed to the context's own leg stops and the store's failures. */
function isStepFailure(thrown: unknown): boolean {
  return !(
    thrown instanceof LeaseLostError ||
    thrown instanceof InfrastructureError ||
    thrown instanceof HandBack ||
    thrown instanceof Park ||
    thrown instanceof SuspendForInput ||
    thrown instanceof MapItemDone ||
    thrown instanceof NonDeterminismError ||
    thrown instanceof StepTooLargeError
  );
}

/** A step returned more than MAX_STEP_BYTES: the task fails at once with this (a checkpoint is replayed whole). */
export class StepTooLargeError extends ProtocolError {
  constructor(name: string, size: number, maxBytes: number) {
    super(
      ProtocolErrorCode.InternalError,
      `step "${name}" returned ${size} bytes, over MAX_STEP_BYTES (${maxBytes}): write large outputs with ctx.artifact and return its link from the step`,
    );
  }
}

export interface StepRunnerOptions {
  db: Kysely<Database>;
  task: ClaimedTask;
  /** What earlier legs recorded (values, positions, failures); updated as steps run. */
  history: StepHistory;
  signal: AbortSignal;
  /** The leg's span: each step's span is its child. */
  trace?: TraceContext | undefined;
  /**
   * True while the worker shuts down, or once the task's owner asked for a pause: no new step starts, the
   * task is handed back instead (and the hand-back pauses it).
   */
  draining?: (() => boolean) | undefined;
  /** Writes a checkpoint (the pool batches its legs' checkpoints). */
  saveStep: (step: StepRecord) => Promise<unknown>;
  /** Steps a task may record (MAX_STEPS_PER_TASK): one more fails it (StepLimitError). */
  maxSteps?: number | undefined;
  /** A step whose value is larger (as JSON) fails the task (MAX_STEP_BYTES); unlimited when undefined. */
  maxStepBytes?: number | undefined;
  /**
   * Writes the events emitted so far: before a step's checkpoint, for the events its function emitted
   * (a replay past the checkpoint does not run the function again, so they could not be written later).
   */
  flushEvents?: (() => Promise<void>) | undefined;
  /** Writes the waiting status message before the task parks. */
  flushStatus: () => Promise<void>;
  /** A map item's leg: recorded steps replay, and any other step is a ReplayMissError (nothing runs). */
  replayOnly?: boolean | undefined;
}

/** `ctx.step`, `ctx.patched` and the self-recording checkpoints (`recorded`) of one attempt. */
export function createStepRunner(opts: StepRunnerOptions) {
  const { history, signal } = opts;
  const guard = stepGuard(history, opts.maxSteps ?? Number.POSITIVE_INFINITY);
  async function step<T>(name: string, fn: StepFn<T>, options: StepOptions = {}): Promise<T> {
    const position = guard.next(name);
    if (history.values.has(name)) return history.values.get(name) as T;
    if (opts.replayOnly === true) throw new ReplayMissError(`step "${name}"`);
    const policy = options.retry === undefined ? undefined : resolveRetry(options.retry, NO_STEP_RETRY);
    for (;;) {
      signal.throwIfAborted();
      if (opts.draining?.() === true) throw new HandBack();
      const attempt = await startAttempt(opts, name, policy);
      try {
        const stored = await runStepOnce(opts, { name, position, attempt }, fn, options.timeoutMs);
        history.values.set(name, stored);
        return stored as T;
      } catch (thrown) {
        if (signal.aborted || !isStepFailure(thrown)) throw thrown;
        await afterStepFailure(opts, { name, attempt, policy }, thrown);
      }
    }
  }
  /**
   * A checkpoint that records itself: replayed by name and checked by the guard like a step, else
   * `record(position)` runs and writes the step row itself, in the same statement as what it stands for
   * (an artifact's completion). Its value is what the handler gets, on every replay too.
   */
  async function recorded<T>(name: string, record: (position: number) => Promise<T>): Promise<T> {
    const position = guard.next(name);
    if (history.values.has(name)) return history.values.get(name) as T;
    if (opts.replayOnly === true) throw new ReplayMissError(`step "${name}"`);
    signal.throwIfAborted();
    if (opts.draining?.() === true) throw new HandBack();
    const value = await record(position);
    history.values.set(name, value);
    return value;
  }
  async function patched(id: string): Promise<boolean> {
    // A task that recorded steps past this point before the patch replays the old code (false); one
    // that reaches it now records the marker and takes the new code (true), on every replay after too.
    if (!guard.replayingOldCode(patchStepName(id))) {
      await step(patchStepName(id), () => true);
      return true;
    }
    return false;
  }
  return { step, patched, recorded, upcomingPosition: () => guard.upcoming() };
}

/**
 * The number of the step's run about to start. A step with a retry policy counts it in Postgres first
 * (so a run its worker did not survive counts too), and fails with StepFailedError instead of starting
 * when its attempts are used up; one without counts its failures (it runs once per leg).
 */
async function startAttempt(
  { db, task, history }: StepRunnerOptions,
  name: string,
  policy: ResolvedRetry | undefined,
): Promise<number> {
  if (policy === undefined) return (history.failures.get(name) ?? 0) + 1;
  const start = await startStepAttempt(db, {
    taskId: task.taskId,
    attempt: task.attempt,
    name,
    maxAttempts: policy.maxAttempts,
  }).catch(infra);
  if ('started' in start) return start.started;
  const why = start.lastError ?? 'its worker stopped while the step ran';
  throw new StepFailedError(name, start.exhausted, new Error(why));
}

/**
 * One run of a step's function, in a span of its own (a step replayed from its checkpoint takes no time
 * and gets none); its value checked for size and written as its checkpoint, which is what it returns.
 */
async function runStepOnce<T>(
  opts: StepRunnerOptions,
  { name, position, attempt }: { name: string; position: number; attempt: number },
  fn: StepFn<T>,
  timeoutMs: number | undefined,
): Promise<unknown> {
  const { task } = opts;
  return inSpan(
    'step',
    { attributes: { 'durable_mcp.step.name': name, 'durable_mcp.step.attempt': attempt } },
    activeOr(opts.trace ?? ROOT_CONTEXT),
    async () => {
      const body = (s: AbortSignal) => inStepBody(position, () => fn(s, { name, attempt }));
      const value = await callStep(name, body, timeoutMs, opts.signal);
      checkStepSize(name, value, opts.maxStepBytes);
      await opts.flushEvents?.().catch(infra);
      return opts
        .saveStep({ taskId: task.taskId, attempt: task.attempt, name, value, position })
        .catch(infra);
    },
  );
}

/**
 * A step's function threw: the failure is counted, then the error goes on to the handler (the step has
 * no retry policy, or its retries ran out), or the step is retried after its backoff: in the slot when
 * the backoff is short, otherwise the task parks until then. Returns when the step may run again.
 */
async function afterStepFailure(
  opts: StepRunnerOptions,
  { name, attempt, policy }: { name: string; attempt: number; policy: ResolvedRetry | undefined },
  thrown: unknown,
): Promise<void> {
  const { task } = opts;
  const error = coerceError(thrown);
  const failures = await recordStepFailure(opts.db, {
    taskId: task.taskId,
    attempt: task.attempt,
    name,
    error: error.message,
  }).catch(infra);
  opts.history.failures.set(name, failures);
  // Without a policy of its own the error goes to the handler as it is (the tool's policy applies).
  if (policy === undefined) throw thrown;
  const delayMs = nextRetryDelay(policy, error, attempt);
  if (delayMs === undefined) {
    if (thrown instanceof NonRetryableError) throw thrown;
    throw new StepFailedError(name, attempt, error);
  }
  if (delayMs > STEP_BACKOFF_IN_SLOT_MS) {
    await opts.flushStatus();
    throw new Park(
      new Date(Date.now() + delayMs),
      `Retrying step ${name} (attempt ${attempt + 1} of ${policy.maxAttempts}) after: ${error.message.slice(0, 200)}`,
    );
  }
  await delay(delayMs, undefined, { signal: opts.signal });
}

/** StepTooLargeError when a step's value is over `maxBytes` as JSON. */
function checkStepSize(name: string, value: unknown, maxBytes: number | undefined): void {
  if (maxBytes === undefined || value === undefined) return;
  const json = JSON.stringify(value) ?? '';
  // (A UTF-8 byte per UTF-16 unit at least, three at most: most values need no count.)
  if (json.length * 3 <= maxBytes) return;
  const size = Buffer.byteLength(json, 'utf8');
  if (size > maxBytes) throw new StepTooLargeError(name, size, maxBytes);
}
