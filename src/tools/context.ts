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
  input(requests: InputRequests): Promise<Record<string, JsonObject>>;
}

export function createToolContext(rt: ContextBackend): ToolContext {
  const one = async (key: string, request: InputRequests[string]) => {
    const responses = await rt.input({ [key]: request });
    return responses[key] as JsonObject;
  };
  let lastProgress = -Infinity;
  return {
    principal: rt.principal,
    taskId: rt.taskId,
    clientCapabilities: rt.clientCapabilities,
    prepared: rt.prepared,
    signal: rt.signal,
    events: rt.events ?? NO_EVENTS,
    status: (message) => rt.status(message),
    closeStream: () => rt.closeStream?.(),
    step: (name, fn, options) => rt.step(name, fn, options),
    sleep: (name, duration) => rt.sleep(name, duration),
    map: (name, items, fn, options) => rt.map(name, items, fn, options),
    patched: (id) => rt.patched(id),
    artifact: (name, source, options) => rt.artifact(name, source, options),
    createSignal: (name, opts) => rt.createSignal(name, opts),
    waitForSignal: (signal, opts) => rt.waitForSignal(signal, opts),
    input: (requests) => rt.input(requests),
    elicit: async (key, params) =>
      (await one(key, {
        method: 'elicitation/create',
        params: { mode: 'form', ...params },
      })) as unknown as ElicitResult,
    sample: (key, params) => one(key, { method: 'sampling/createMessage', params }),
    listRoots: (key) => one(key, { method: 'roots/list', params: {} }),
    async progress(progress, total, message) {
      if (rt.notify === undefined || rt.progressToken === undefined) return;
      // Progress must increase with each notification.
      if (!(progress > lastProgress)) return;
      lastProgress = progress;
      await rt.notify({
        method: 'notifications/progress',
        params: {
          progressToken: rt.progressToken,
          progress,
          ...(total === undefined ? {} : { total }),
          ...(message === undefined ? {} : { message }),
        },
      });
    },
    async log(level, data, logger) {
      if (rt.notify === undefined || rt.logLevel === undefined) return;
      if (LOG_LEVELS.indexOf(level) < LOG_LEVELS.indexOf(rt.logLevel)) return;
      await rt.notify({
        method: 'notifications/message',
        params: { level, data, ...(logger === undefined ? {} : { logger }) },
      });
    },
  };
}
