import { setTimeout as delay } from 'node:timers/promises';
import type { ServerEvents } from '../core/server-events.ts';
import type { ClientCapabilities, InputRequests, InputResponses, JsonObject } from '../core/wire.ts';
import { assertInputSupported } from './capabilities.ts';
import { callStep, MAP_CONCURRENCY } from './retry.ts';
import type { ContextBackend, Notification } from './context.ts';
import type { LogLevel } from './define.ts';

const SIGNALS_NEED_A_TASK =
  "signals need a task: give the tool taskSupport 'required' (a synchronous call cannot wait for one)";

const CHILDREN_NEED_A_TASK =
  "child tasks need a task: give the tool taskSupport 'required' (a synchronous call cannot wait for one)";

const ARTIFACTS_NEED_A_TASK =
  "artifacts need a task: give the tool taskSupport 'required' (a synchronous call's output is its result)";

/** Thrown by a synchronous call's `input` when answers are missing: becomes an InputRequiredResult. */
export class InputRequiredSignal extends Error {
  override readonly name = 'InputRequiredSignal';
  constructor(readonly inputRequests: InputRequests) {
    super('Input required');
  }
}

export interface RequestBackendOptions {
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

/** What a handler's context does inside one HTTP request (a synchronous call): steps just run, input goes through MRTR. */
export function createRequestBackend(opts: RequestBackendOptions): ContextBackend {
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
    // (A synchronous call has no task, so no event stream: its result is its output.)
    emit: async () => {},
    partial: async () => {},
    // Nothing to replay in one request: a step just runs (its timeout applies; retry the call instead).
    step: async (name, fn, options) =>
      callStep(name, (signal) => fn(signal, { name, attempt: 1 }), options?.timeoutMs, opts.signal),
    // The items run in this request, `concurrency` at a time (nothing to spread: the call is its own).
    map: (name, items, fn, options) =>
      mapInRequest(items, options?.concurrency ?? MAP_CONCURRENCY.default, (item, index) =>
        callStep(
          `${name}[${index}]`,
          (signal) => fn(item, index, signal, { map: name, index, attempt: 1 }),
          options?.timeoutMs,
          opts.signal,
        ),
      ),
    // Nothing was recorded before this request: a synchronous call always runs the new code.
    patched: () => Promise.resolve(true),
    // Nothing outlives the request: a synchronous call waits in it (a client that leaves ends the wait).
    sleep: (_name, duration) =>
      delay(
        // (+1: a timer may fire up to a millisecond before Date.now() reaches its time.)
        Math.max(0, typeof duration === 'number' ? duration : duration.getTime() - Date.now()) + 1,
        undefined,
        { signal: opts.signal },
      ),
    // An artifact outlives the call and is read back by its task: a synchronous call has none.
    artifact: () => Promise.reject(new Error(ARTIFACTS_NEED_A_TASK)),
    // A signal is delivered later, by someone else: only a task can wait for one.
    createSignal: () => Promise.reject(new Error(SIGNALS_NEED_A_TASK)),
    waitForSignal: () => Promise.reject(new Error(SIGNALS_NEED_A_TASK)),
    callTool: () => Promise.reject(new Error(CHILDREN_NEED_A_TASK)),
    spawn: () => Promise.reject(new Error(CHILDREN_NEED_A_TASK)),
    join: () => Promise.reject(new Error(CHILDREN_NEED_A_TASK)),
    joinFirst: () => Promise.reject(new Error(CHILDREN_NEED_A_TASK)),
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

/** Runs `run` over `items`, at most `concurrency` at once; results in order, the first error rejects. */
async function mapInRequest<T, R>(
  items: readonly T[],
  concurrency: number,
  run: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await run(items[index]!, index);
    }
  };
  const lanes = Math.max(1, Math.min(concurrency, MAP_CONCURRENCY.max, items.length));
  await Promise.all(Array.from({ length: lanes }, lane));
  return results;
}
