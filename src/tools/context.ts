import { NO_EVENTS, type ServerEvents } from '../core/server-events.ts';
import {
  LOG_LEVELS,
  type ClientCapabilities,
  type ElicitResult,
  type InputRequests,
  type JsonObject,
  type Notification,
} from '../core/wire.ts';
import type { LogLevel, ToolContext } from './define.ts';

export type { Notification };

/** What differs between running as a task (durable) and running synchronously (MRTR). */
export interface ToolRuntime {
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
  step<T>(name: string, fn: () => Promise<T> | T): Promise<T>;
  input(requests: InputRequests): Promise<Record<string, JsonObject>>;
}

export function createToolContext(rt: ToolRuntime): ToolContext {
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
    step: (name, fn) => rt.step(name, fn),
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
