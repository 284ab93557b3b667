import { setTimeout as delay } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { ServerEvents } from '../events/server-events.ts';
import type { Logger } from '../log.ts';
import type { InputRequests, JsonObject } from '../core/wire.ts';
import { assertInputSupported } from '../tools/capabilities.ts';
import type { ContextBackend } from '../tools/context.ts';
import { suspendForInput } from '../tasks/store/input.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import type { StepHistory, StepRecord } from '../tasks/store/steps.ts';
import { noWrittenEvents, type WrittenEvents } from '../tasks/store/events.ts';
import type { TraceContext } from '../core/tracing.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import type { Metrics } from '../core/metrics.ts';
import { createArtifactWriter } from './attempt-artifacts.ts';
import { createMapRunner, type MapItemLeg } from './attempt-map.ts';
import { createAttemptSignals } from './attempt-signals.ts';
import { createAttemptChildren, type ChildrenSettings } from './attempt-children.ts';
import { createAttemptSteering } from './attempt-steering.ts';
import { silentStatus, throttledStatus, type AttemptStatus } from './attempt-status.ts';
import { SERVER_EVENTS } from '../core/task-events.ts';
import { createEventWriter, type EventLimits, type EventWriter } from './attempt-events.ts';
import { createStepRunner, sleepStepName } from './attempt-steps.ts';
import { infra, Park, SuspendForInput } from './leg-stops.ts';
import { ReplayMissError } from './step-guard.ts';

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
  /** The events earlier legs wrote (ctx.emit): none for a first leg. */
  written?: WrittenEvents | undefined;
  /** MAX_EVENT_BYTES, MAX_EVENTS_PER_TASK, MAX_EVENT_BYTES_PER_TASK. */
  eventLimits: EventLimits;
  signal: AbortSignal;
  /** The leg's span: each step's span is its child. */
  trace?: TraceContext | undefined;
  /** True while the worker shuts down, or its owner pauses the task: no new step starts, it is handed back. */
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
  /** What child tasks are made with (ctx.callTool, ctx.spawn). */
  children: ChildrenSettings;
  log: Logger;
}

export type AttemptBackend = ContextBackend &
  Pick<AttemptStatus, 'flush' | 'takePending'> & {
    /** Writes the events still queued (before the task's completion is written). */
    flushEvents: () => Promise<void>;
  };

/**
 * What a handler's context does in a task's attempt on a worker: checkpointed steps, durable sleeps,
 * signals (attempt-signals.ts), maps, artifacts, and input through `input_required`.
 */
export function createAttemptBackend(opts: AttemptBackendOptions): AttemptBackend {
  const { db, task, signal } = opts;
  const replayOnly = opts.mapItem !== undefined;
  const status = replayOnly ? silentStatus() : throttledStatus(opts);
  // (The step runner writes a step's events before its checkpoint: the writer is made next.)
  const flushEvents = () => events.flush();
  const { step, patched, recorded, upcomingPosition } = stepRunnerOf(opts, {
    status,
    replayOnly,
    flushEvents,
  });
  const events = createEventWriter({
    db,
    task,
    written: opts.written ?? noWrittenEvents(),
    limits: opts.eventLimits,
    position: upcomingPosition,
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
    emit: events.emit,
    partial: events.partial,
    flush: async () => {
      await events.flush();
      await status.flush();
    },
    flushEvents: events.flush,
    takePending: status.takePending,
    step,
    patched,
    map,
    artifact: async (name, source, options) => {
      const link = await artifact(name, source, options);
      events.emitServerEvent(`artifact:${name}`, SERVER_EVENTS.artifact, link);
      return link;
    },
    sleep: (name, duration) => durableSleep({ step, signal, status, replayOnly }, name, duration),
    ...createAttemptSignals({ ...opts, step, status, replayOnly }),
    ...createAttemptChildren({ ...opts, step, status, replayOnly }),
    steering: createAttemptSteering({ ...opts, step, status, replayOnly }),
    input: (requests) => askForInput(opts, { status, events, replayOnly }, requests),
  };
}

/**
 * The attempt's step runner; a task that parks in a step writes its waiting status message first, and a
 * step's events are written before its checkpoint.
 */
function stepRunnerOf(
  opts: AttemptBackendOptions,
  {
    status,
    replayOnly,
    flushEvents,
  }: { status: AttemptStatus; replayOnly: boolean; flushEvents: () => Promise<void> },
) {
  return createStepRunner({
    db: opts.db,
    task: opts.task,
    history: opts.steps,
    signal: opts.signal,
    trace: opts.trace,
    draining: opts.draining,
    saveStep: opts.saveStep,
    maxSteps: opts.maxSteps,
    maxStepBytes: opts.maxStepBytes,
    flushStatus: status.flush,
    flushEvents,
    replayOnly,
  });
}

interface SleepDeps {
  step: ContextBackend['step'];
  signal: AbortSignal;
  status: AttemptStatus;
  replayOnly: boolean;
}

/** ctx.sleep: a short sleep waits in the slot, a longer one parks the task until its deadline. */
async function durableSleep(
  { step, signal, status, replayOnly }: SleepDeps,
  name: string,
  duration: number | Date,
): Promise<void> {
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
  throw new Park(until, `Sleeping until ${until.toISOString()}`);
}

/** ctx.input: the answers given so far; while any is missing, the task suspends (`input_required`). */
async function askForInput(
  { db, task, inputs }: AttemptBackendOptions,
  { status, events, replayOnly }: { status: AttemptStatus; events: EventWriter; replayOnly: boolean },
  requests: InputRequests,
): Promise<Record<string, JsonObject>> {
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
  // (Keyed by what it asks: a later leg, answered, asks nothing here.)
  const keys = Object.keys(missing).sort();
  events.emitServerEvent(`input:${keys.join(',')}`, SERVER_EVENTS.inputRequired, { inputRequests: missing });
  await events.flush();
  await status.flush();
  await suspendForInput(db, task.taskId, task.attempt, missing).catch(infra);
  throw new SuspendForInput(task.taskId);
}
