import { NO_EVENTS, type ServerEvents } from '../core/server-events.ts';
import {
  LOG_LEVELS,
  type ClientCapabilities,
  type ElicitResult,
  type InputRequests,
  type JsonObject,
  type Notification,
} from '../core/wire.ts';
import type { LogLevel, SignalHandle, SignalResult, ToolContext } from './define.ts';
import type { StepFn, StepOptions } from './retry.ts';
import { NO_STEERING, type Steering } from './steering.ts';

export type { Notification };

/**
 * What a handler's context is built on, the part that differs between a task's attempt on a worker
 * (worker/attempt-backend.ts: durable steps, input through `input_required`) and a synchronous call
 * inside one HTTP request (request-backend.ts: steps just run, input through MRTR).
 */
export interface ContextBackend {
  readonly principal: string;
  readonly taskId: string | undefined;
  readonly clientCapabilities: ClientCapabilities;
  readonly prepared: unknown;
  readonly signal: AbortSignal;
  readonly events?: ServerEvents | undefined;
  readonly progressToken?: string | number | undefined;
  readonly logLevel?: LogLevel | undefined;
  status(message: string): void;
  /** ctx.emit and ctx.partial: a task's durable events; nothing for a synchronous call. */
  emit(type: string, payload?: unknown): Promise<void>;
  partial(content: JsonObject[]): Promise<void>;
  /** Delivers a request-scoped notification; absent for tasks, which have no stream. */
  notify?: ((notification: Notification) => Promise<void>) | undefined;
  /** Ends the call's response stream early, where the client can resume it. */
  closeStream?: (() => void) | undefined;
  step<T>(name: string, fn: StepFn<T>, options?: StepOptions): Promise<T>;
  sleep(name: string, duration: number | Date): Promise<void>;
  map: ToolContext['map'];
  patched(id: string): Promise<boolean>;
  artifact: ToolContext['artifact'];
  createSignal(name: string, opts?: { timeoutMs?: number }): Promise<SignalHandle>;
  waitForSignal(signal: SignalHandle, opts?: { statusMessage?: string }): Promise<SignalResult>;
  callTool: ToolContext['callTool'];
  spawn: ToolContext['spawn'];
  join: ToolContext['join'];
  joinFirst: ToolContext['joinFirst'];
  input(requests: InputRequests): Promise<Record<string, JsonObject>>;
  /** A task's steering messages; absent for a synchronous call, whose reads then fail (NO_STEERING). */
  steering?: Steering | undefined;
}

export function createToolContext(backend: ContextBackend): ToolContext {
  const one = async (key: string, request: InputRequests[string]) => {
    const responses = await backend.input({ [key]: request });
    return responses[key] as JsonObject;
  };
  let lastProgress = -Infinity;
  return {
    principal: backend.principal,
    taskId: backend.taskId,
    clientCapabilities: backend.clientCapabilities,
    prepared: backend.prepared,
    signal: backend.signal,
    events: backend.events ?? NO_EVENTS,
    status: (message) => backend.status(message),
    emit: (type, payload) => backend.emit(type, payload),
    partial: (content) => backend.partial(content),
    closeStream: () => backend.closeStream?.(),
    step: (name, fn, options) => backend.step(name, fn, options),
    sleep: (name, duration) => backend.sleep(name, duration),
    map: (name, items, fn, options) => backend.map(name, items, fn, options),
    patched: (id) => backend.patched(id),
    artifact: (name, source, options) => backend.artifact(name, source, options),
    createSignal: (name, opts) => backend.createSignal(name, opts),
    waitForSignal: (signal, opts) => backend.waitForSignal(signal, opts),
    callTool: (name, args, options) => backend.callTool(name, args, options),
    spawn: (name, args, options) => backend.spawn(name, args, options),
    join: (handles) => backend.join(handles),
    joinFirst: (handles) => backend.joinFirst(handles),
    input: (requests) => backend.input(requests),
    steering: backend.steering ?? NO_STEERING,
    elicit: async (key, params) =>
      (await one(key, {
        method: 'elicitation/create',
        params: { mode: 'form', ...params },
      })) as unknown as ElicitResult,
    sample: (key, params) => one(key, { method: 'sampling/createMessage', params }),
    listRoots: (key) => one(key, { method: 'roots/list', params: {} }),
    async progress(progress, total, message) {
      if (backend.notify === undefined || backend.progressToken === undefined) return;
      // Progress must increase with each notification.
      if (!(progress > lastProgress)) return;
      lastProgress = progress;
      await backend.notify({
        method: 'notifications/progress',
        params: {
          progressToken: backend.progressToken,
          progress,
          ...(total === undefined ? {} : { total }),
          ...(message === undefined ? {} : { message }),
        },
      });
    },
    async log(level, data, logger) {
      if (backend.notify === undefined || backend.logLevel === undefined) return;
      if (LOG_LEVELS.indexOf(level) < LOG_LEVELS.indexOf(backend.logLevel)) return;
      await backend.notify({
        method: 'notifications/message',
        params: { level, data, ...(logger === undefined ? {} : { logger }) },
      });
    },
  };
}
