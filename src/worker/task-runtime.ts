import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { isConnectionError } from '../db/errors.ts';
import type { ServerEvents } from '../events/server-events.ts';
import type { Logger } from '../log.ts';
import type { InputRequests, JsonObject } from '../core/wire.ts';
import { assertInputSupported } from '../tools/capabilities.ts';
import type { ToolRuntime } from '../tools/context.ts';
import { setStatusMessage } from '../tasks/store/finish.ts';
import { suspendForInput } from '../tasks/store/input.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import type { StepRecord } from '../tasks/store/steps.ts';
import { activeOr, inSpan, ROOT_CONTEXT, type TraceContext } from '../core/tracing.ts';

/** Thrown by `input` once the task is parked in `input_required`: this leg of the job ends here. */
export class TaskSuspendedSignal extends Error {
  override readonly name = 'TaskSuspendedSignal';
  constructor(readonly taskId: string) {
    super('Task is waiting for input');
  }
}

/** A store operation failed (connection loss, failover…): not the handler's fault, no retry counted. */
export class InfrastructureError extends Error {
  override readonly name = 'InfrastructureError';
}

/** A lost connection during a store operation becomes InfrastructureError; anything else stays as it is. */
function infra(err: unknown): never {
  if (!isConnectionError(err)) throw err;
  throw new InfrastructureError(err instanceof Error ? err.message : String(err), { cause: err });
}

/** Thrown at a step boundary while the worker shuts down: the task is handed to another worker. */
export class HandoffSignal extends Error {
  override readonly name = 'HandoffSignal';
  constructor() {
    super('The worker is shutting down');
  }
}

export interface TaskRuntimeOptions {
  db: Kysely<Database>;
  task: ClaimedTask;
  steps: Map<string, unknown>;
  inputs: Map<string, { request: unknown; response: unknown }>;
  signal: AbortSignal;
  /** The leg's span: each step's span is its child. */
  trace?: TraceContext | undefined;
  /** True while the worker shuts down: no new step starts, the task is handed back instead. */
  draining?: () => boolean;
  events?: ServerEvents | undefined;
  statusThrottleMs: number;
  /** Writes a checkpoint (the pool batches its legs' checkpoints). */
  saveStep: (step: StepRecord) => Promise<unknown>;
  log: Logger;
}

export type TaskRuntime = ToolRuntime & {
  /** Writes the waiting status message now. */
  flush(): Promise<void>;
  /** Takes the waiting status message instead of writing it (the caller writes it with its own update). */
  takePending(): Promise<string | undefined>;
};

/** A handler's durable context on a worker: checkpointed steps, input through `input_required`. */
export function createTaskRuntime(opts: TaskRuntimeOptions): TaskRuntime {
  const { db, task, steps, inputs, signal } = opts;
  const status = throttledStatus(opts);
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
    async step<T>(name: string, fn: () => Promise<T> | T): Promise<T> {
      if (steps.has(name)) return steps.get(name) as T;
      signal.throwIfAborted();
      if (opts.draining?.() === true) throw new HandoffSignal();
      // Steps replayed from their checkpoints above take no time and get no span; a step that runs does.
      const stored = await inSpan(
        'step',
        { attributes: { 'durable_mcp.step.name': name } },
        activeOr(opts.trace ?? ROOT_CONTEXT),
        async () => {
          const value = await fn();
          return opts.saveStep({ taskId: task.taskId, attempt: task.attempt, name, value }).catch(infra);
        },
      );
      steps.set(name, stored);
      return stored as T;
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
      await status.flush();
      await suspendForInput(db, task.taskId, task.attempt, missing).catch(infra);
      throw new TaskSuspendedSignal(task.taskId);
    },
  };
}

/** statusMessage writes at most once per `statusThrottleMs`; the latest message always lands. */
function throttledStatus({ db, task, statusThrottleMs, log }: TaskRuntimeOptions) {
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
