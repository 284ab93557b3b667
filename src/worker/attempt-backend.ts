import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { ServerEvents } from '../events/server-events.ts';
import type { Logger } from '../log.ts';
import type { InputRequests, JsonObject } from '../core/wire.ts';
import { assertInputSupported } from '../tools/capabilities.ts';
import type { ContextBackend } from '../tools/context.ts';
import type { SignalHandle, SignalResult } from '../tools/define.ts';
import { createSignal, readSignal } from '../tasks/store/signals.ts';
import { setStatusMessage } from '../tasks/store/finish.ts';
import { suspendForInput } from '../tasks/store/input.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import { signalStepName, type StepHistory, type StepRecord } from '../tasks/store/steps.ts';
import type { TraceContext } from '../core/tracing.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import type { Metrics } from '../core/metrics.ts';
import { createArtifactWriter } from './attempt-artifacts.ts';
import { createMapRunner, type MapItemLeg } from './attempt-map.ts';
import { createStepRunner, sleepStepName } from './attempt-steps.ts';
import { ReplayMissError } from './step-guard.ts';
import { infra, TaskParkedSignal, TaskSuspendedSignal } from './leg-signals.ts';

/** A wait with no deadline of its own looks again this often (its signal's delivery wakes it sooner). */
export const PARKED_RECHECK_MS = 24 * 3_600_000;

/**
 * Sleeps shorter than this wait in the slot (abortable): parking a task and waking it costs more than
 * they last.
 */
export const SLEEP_IN_SLOT_MS = 1_000;

export interface AttemptBackendOptions {
  db: Kysely<Database>;
  task: ClaimedTask;
  /** What earlier legs recorded: replayed steps return their values, and the guard checks their order. */
  steps: StepHistory;
  inputs: Map<string, { request: unknown; response: unknown }>;
  signal: AbortSignal;
  /** The leg's span: each step's span is its child. */
  trace?: TraceContext | undefined;
  /** True while the worker shuts down: no new step starts, the task is handed back instead. */
  draining?: () => boolean;
  events?: ServerEvents | undefined;
  statusThrottleMs: number;
  /** A signal's delivery URL, from its token. */
  signalUrl: (token: string) => string;
  /** An artifact's HTTP download URL. */
  artifactUrl: (taskId: string, name: string) => string;
  /** A step whose value is larger (as JSON) fails the task (MAX_STEP_BYTES). */
  maxStepBytes?: number | undefined;
  /** An artifact that grows larger fails the task (MAX_ARTIFACT_BYTES). */
  maxArtifactBytes?: number | undefined;
  metrics?: Metrics | undefined;
  /** Writes a checkpoint (the pool batches its legs' checkpoints). */
  saveStep: (step: StepRecord) => Promise<unknown>;
  /** Steps a task may record (MAX_STEPS_PER_TASK). */
  maxSteps?: number | undefined;
  /** Where a map's first items are enqueued. */
  queue: TaskQueue;
  /**
   * Set in a map item's leg, where `task` is the parent: its handler replays from the parent's
   * checkpoints to the map, writes nothing and waits for nothing, and runs this item only.
   */
  mapItem?: MapItemLeg | undefined;
  log: Logger;
}

export type AttemptBackend = ContextBackend & {
  /** Writes the waiting status message now. */
  flush(): Promise<void>;
  /** Takes the waiting status message instead of writing it (the caller writes it with its own update). */
  takePending(): Promise<string | undefined>;
};

/** What a handler's context does in a task's attempt on a worker: checkpointed steps, input through `input_required`. */
export function createAttemptBackend(opts: AttemptBackendOptions): AttemptBackend {
  const { db, task, steps, inputs, signal } = opts;
  const replayOnly = opts.mapItem !== undefined;
  const status = replayOnly ? silentStatus() : throttledStatus(opts);
  const { step, patched, recorded } = createStepRunner({
    db,
    task,
    history: steps,
    signal,
    trace: opts.trace,
    draining: opts.draining,
    saveStep: opts.saveStep,
    maxSteps: opts.maxSteps,
    maxStepBytes: opts.maxStepBytes,
    flushStatus: status.flush,
    replayOnly,
  });
  const artifact = createArtifactWriter({
    db,
    task,
    signal,
    recorded,
    artifactUrl: opts.artifactUrl,
    maxBytes: opts.maxArtifactBytes,
    metrics: opts.metrics,
  });
  const { map } = createMapRunner({
    db,
    task,
    queue: opts.queue,
    signal,
    step,
    flushStatus: status.flush,
    status: status.set,
    item: opts.mapItem,
  });
  return {
    principal: task.principal,
    taskId: task.taskId,
    clientCapabilities: task.clientCapabilities,
    prepared: task.prepared,
    signal,
    events: opts.events,
    status: status.set,
    flush: status.flush,
    takePending: status.takePending,
    step,
    patched,
    map,
    artifact,
    async sleep(name: string, duration: number | Date): Promise<void> {
      // The deadline is recorded once: a replay (after a crash, or at the wake-up) sleeps only what is left.
      const wakeAt = await step(sleepStepName(name), () =>
        new Date(typeof duration === 'number' ? Date.now() + duration : duration.getTime()).toISOString(),
      );
      const until = new Date(wakeAt);
      const left = until.getTime() - Date.now();
      // (A map item replays past a sleep its parent finished, whatever this worker's clock says.)
      if (left <= 0 || replayOnly) return;
      signal.throwIfAborted();
      // (+1: a timer may fire up to a millisecond before Date.now() reaches its time.)
      if (left < SLEEP_IN_SLOT_MS) return delay(left + 1, undefined, { signal });
      await status.flush();
      throw new TaskParkedSignal(until, `Sleeping until ${until.toISOString()}`);
    },
    async createSignal(name: string, { timeoutMs }: { timeoutMs?: number } = {}): Promise<SignalHandle> {
      // Created once: a replay gets the same token back from the step.
      const created = await step(signalStepName(name), async () => {
        const token = randomBytes(24).toString('base64url');
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
    async waitForSignal(
      handle: SignalHandle,
      waitOpts: { statusMessage?: string } = {},
    ): Promise<SignalResult> {
      // Delivered before this leg began: read with the steps (see loadStepHistory).
      if (steps.deliveredSignals.has(handle.name)) {
        return { status: 'delivered', payload: steps.deliveredSignals.get(handle.name) };
      }
      const state = await readSignal(db, task.taskId, handle.name).catch(infra);
      if (state === undefined)
        throw new Error(`no signal ${handle.name} was created in this task (ctx.createSignal)`);
      if (state.deliveredAt !== null) return { status: 'delivered', payload: state.payload };
      if (state.timeoutAt !== null && state.timeoutAt <= state.now) return { status: 'timed_out' };
      if (replayOnly) throw new ReplayMissError(`a wait for signal "${handle.name}"`);
      signal.throwIfAborted();
      await status.flush();
      // Until the timeout (by this clock: the wake-up reads the database's again), or a daily look.
      const recheck = Date.now() + PARKED_RECHECK_MS;
      const until =
        state.timeoutAt === null
          ? recheck
          : Math.min(recheck, Date.now() + (state.timeoutAt.getTime() - state.now.getTime()));
      throw new TaskParkedSignal(
        new Date(until),
        waitOpts.statusMessage ?? `Waiting for signal ${handle.name}`,
        { signal: handle.name },
      );
    },
    async input(requests: InputRequests): Promise<Record<string, JsonObject>> {
      assertInputSupported(requests, task.clientCapabilities);
      const answered: Record<string, JsonObject> = {};
      const missing: InputRequests = {};
      for (const [key, request] of Object.entries(requests)) {
        const response = inputs.get(key)?.response;
        if (response === null || response === undefined) missing[key] = request;
        else answered[key] = response as JsonObject;
      }
      if (Object.keys(missing).length === 0) return answered;
      if (replayOnly) throw new ReplayMissError(`input ${Object.keys(missing).join(', ')}`);
      await status.flush();
      await suspendForInput(db, task.taskId, task.attempt, missing).catch(infra);
      throw new TaskSuspendedSignal(task.taskId);
    },
  };
}

/** A map item's replay: the parent's status messages are the parent's own legs' business. */
function silentStatus() {
  return {
    set: () => {},
    flush: () => Promise.resolve(),
    takePending: () => Promise.resolve(undefined),
  };
}

/** statusMessage writes at most once per `statusThrottleMs`; the latest message always lands. */
function throttledStatus({ db, task, statusThrottleMs, log }: AttemptBackendOptions) {
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
