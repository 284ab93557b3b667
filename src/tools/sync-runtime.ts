import type { ServerEvents } from '../core/server-events.ts';
import type { ClientCapabilities, InputRequests, InputResponses, JsonObject } from '../core/wire.ts';
import { assertInputSupported } from './capabilities.ts';
import type { Notification, ToolRuntime } from './context.ts';
import type { LogLevel } from './define.ts';

/** Thrown by a synchronous call's `input` when answers are missing: becomes an InputRequiredResult. */
export class InputRequiredSignal extends Error {
  override readonly name = 'InputRequiredSignal';
  constructor(readonly inputRequests: InputRequests) {
    super('Input required');
  }
}

export interface SyncRuntimeOptions {
  principal: string;
  clientCapabilities: ClientCapabilities;
  signal: AbortSignal;
  events?: ServerEvents | undefined;
  /** Every response the client has given so far (from requestState and this round's inputResponses). */
  responses: InputResponses;
  prepared?: unknown;
  progressToken?: string | number | undefined;
  logLevel?: LogLevel | undefined;
  notify?: ((notification: Notification) => Promise<void>) | undefined;
  closeStream?: (() => void) | undefined;
}

/** Runs a handler inside one HTTP request: steps just run, input goes through MRTR. */
export function createSyncRuntime(opts: SyncRuntimeOptions): ToolRuntime {
  return {
    principal: opts.principal,
    taskId: undefined,
    clientCapabilities: opts.clientCapabilities,
    prepared: opts.prepared,
    signal: opts.signal,
    events: opts.events,
    progressToken: opts.progressToken,
    logLevel: opts.logLevel,
    notify: opts.notify,
    closeStream: opts.closeStream,
    status: () => {},
    step: async (_name, fn) => fn(),
    input(requests) {
      assertInputSupported(requests, opts.clientCapabilities);
      const missing = Object.keys(requests).filter((key) => opts.responses[key] === undefined);
      if (missing.length > 0) {
        return Promise.reject(
          new InputRequiredSignal(Object.fromEntries(missing.map((key) => [key, requests[key]!]))),
        );
      }
      const answered: Record<string, JsonObject> = {};
      for (const key of Object.keys(requests)) answered[key] = opts.responses[key]!;
      return Promise.resolve(answered);
    },
  };
}
