// `TasksClient.events`: a task's events (`tasks/stream`, the SEP-2694 draft), read to the task's end
// across dropped connections, server restarts and restarts of the host, each event once.
import { setTimeout as sleep } from 'node:timers/promises';
import {
  EVENTS_GONE_CODE,
  META_EVENT_TIME,
  SERVER_EVENTS,
  TASK_EVENT_NOTIFICATION,
} from '../core/task-events.ts';
import { isJsonObject, type JsonObject } from '../core/wire.ts';
import { McpConnectionError, McpRpcError, type McpHttp } from './http.ts';
import type { TaskIdStore } from './store.ts';

/** One event of a task (SEP-2694's `TaskEvent`). */
export interface TaskEvent {
  taskId: string;
  /** Its number in the task: one more than the event before (our server starts at 1, the draft at 0). */
  seq: number;
  /** Vendor-prefixed: `dev.durable-mcp-tasks/partial`, or a tool's own such as `com.example.scan/row`. */
  type: string;
  payload: JsonObject;
  /** When the server wrote it (ISO 8601): ours says so in `_meta`; absent from servers that do not. */
  time?: string;
  /** The notification's `_meta` as sent (`io.modelcontextprotocol/related-task` among it). */
  meta: JsonObject;
}

export interface EventsOptions {
  /**
   * Start after this seq, in place of the cursor the store keeps for the task. Without either, the
   * stream starts at the earliest event the server still keeps.
   */
  after?: number;
  /** Stops reading: the iterator throws the signal's reason (the task runs on). */
  signal?: AbortSignal;
  /** How long the server may stay unreachable, or keep cutting the stream short, before the iterator throws. Default 60 s. */
  reconnectMs?: number;
  /**
   * When the server no longer keeps the events after the cursor (-32010): `throw` a
   * TaskEventsGoneError (the default), or `skip` to the earliest event it keeps.
   */
  ifGone?: 'throw' | 'skip';
  /** Told what was skipped, before the iterator goes on (`ifGone: 'skip'`). */
  onGone?: (gone: TaskEventsGoneError) => void;
  /** Told each time the iterator waits to open the stream again, and why. */
  onReconnect?: (reason: Error, delayMs: number) => void;
}

/**
 * The server no longer keeps the events after the cursor (SEP-2694 `events_gone`, -32010): the oldest
 * it keeps is `earliestSeq`. Read on from there with `after: earliestSeq - 1`, or `ifGone: 'skip'`.
 */
export class TaskEventsGoneError extends McpRpcError {
  override readonly name: string = 'TaskEventsGoneError';
  constructor(
    cause: McpRpcError,
    readonly taskId: string,
    /** The cursor the server refused (undefined: from its earliest event). */
    readonly after: number | undefined,
    readonly earliestSeq: number,
  ) {
    super(cause.method, cause.code, cause.rpcMessage, cause.data);
  }
}

export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 5_000;

/** Where a reader is: the last seq processed (undefined: none yet). */
interface Cursor {
  after: number | undefined;
}

/**
 * The task's events, in order, each once, until its last one: our server's final
 * `dev.durable-mcp-tasks/status` event, or (any server) a stream that ends with a result once the
 * task has ended. The cursor is saved in the store when the caller asks for the event after it.
 */
export async function* taskEvents(
  http: McpHttp,
  store: TaskIdStore,
  taskId: string,
  opts: EventsOptions = {},
): AsyncGenerator<TaskEvent, void, undefined> {
  const cursor: Cursor = { after: opts.after ?? (await store.eventCursor?.(http.url, taskId)) };
  const retry = new Retry(opts);
  const save = async (seq: number) => store.saveEventCursor?.(http.url, taskId, seq);
  // Once the task was seen ended, the next stream to end with a result has sent everything.
  let lastRound = false;
  for (;;) {
    try {
      const end = yield* readStream(http, taskId, cursor, { retry, save, signal: opts.signal });
      if (end === 'final' || (end === 'result' && lastRound)) return;
      if (end === 'result' && (await taskEnded(http, taskId, opts.signal))) {
        lastRound = true;
        continue;
      }
      // Closed before the task ended (the draft allows it), or cut without a result (a shutdown).
      const reason = end === 'result' ? 'closed the stream' : 'ended the stream without a result';
      await retry.wait(new McpConnectionError(`tasks/stream: ${http.url} ${reason}`), end === 'cut');
    } catch (err) {
      opts.signal?.throwIfAborted();
      const gone = goneOf(err, taskId, cursor.after);
      if (gone !== undefined) {
        if (opts.ifGone !== 'skip') throw gone;
        opts.onGone?.(gone);
        cursor.after = gone.earliestSeq > 0 ? gone.earliestSeq - 1 : undefined;
        continue;
      }
      if (!retryable(err)) throw err;
      await retry.wait(err, true);
    }
  }
}

/**
 * One `tasks/stream` request from the cursor: yields each new event, and moves the cursor past it
 * (saved) when the caller asks for the next. Returns how the stream ended.
 */
async function* readStream(
  http: McpHttp,
  taskId: string,
  cursor: Cursor,
  { retry, save, signal }: { retry: Retry; save: (seq: number) => Promise<void>; signal?: AbortSignal },
): AsyncGenerator<TaskEvent, 'final' | 'result' | 'cut', undefined> {
  const params = cursor.after === undefined ? { taskId } : { taskId, after: cursor.after };
  const stop = new AbortController();
  try {
    const both = signal === undefined ? stop.signal : AbortSignal.any([stop.signal, signal]);
    for await (const message of http.messages('tasks/stream', params, both)) {
      if ('result' in message) return 'result';
      const event = eventOf(message, taskId);
      // (After a reconnect a server may send again what was seen: SEP-2694 asks clients to dedupe.)
      if (event === undefined || (cursor.after !== undefined && event.seq <= cursor.after)) continue;
      retry.reset();
      yield event;
      cursor.after = event.seq;
      await save(event.seq);
      if (event.type === SERVER_EVENTS.status) return 'final';
    }
    return 'cut';
  } finally {
    stop.abort();
  }
}

/** A `notifications/tasks/event` of the task as a TaskEvent; undefined for any other message. */
function eventOf(message: JsonObject, taskId: string): TaskEvent | undefined {
  if (message.method !== TASK_EVENT_NOTIFICATION || !isJsonObject(message.params)) return undefined;
  const { seq, type, payload, _meta } = message.params;
  if (message.params.taskId !== taskId || typeof type !== 'string' || !isJsonObject(payload))
    return undefined;
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) return undefined;
  const meta = isJsonObject(_meta) ? _meta : {};
  const time = meta[META_EVENT_TIME];
  return { taskId, seq, type, payload, ...(typeof time === 'string' ? { time } : {}), meta };
}

async function taskEnded(http: McpHttp, taskId: string, signal: AbortSignal | undefined): Promise<boolean> {
  const task = await http.request('tasks/get', { taskId }, signal);
  return TERMINAL_STATUSES.has(String(task.status));
}

function goneOf(err: unknown, taskId: string, after: number | undefined): TaskEventsGoneError | undefined {
  if (!(err instanceof McpRpcError) || err.code !== EVENTS_GONE_CODE) return undefined;
  const earliest = isJsonObject(err.data) ? err.data.earliestSeq : undefined;
  return typeof earliest === 'number' ? new TaskEventsGoneError(err, taskId, after, earliest) : undefined;
}

/** A connection that failed or broke off, or a server that says to retry (`data.retryAfterMs`). */
function retryable(err: unknown): err is Error {
  return err instanceof McpConnectionError || retryAfterOf(err) !== undefined;
}

function retryAfterOf(err: unknown): number | undefined {
  if (!(err instanceof McpRpcError) || !isJsonObject(err.data)) return undefined;
  const ms = err.data.retryAfterMs;
  return typeof ms === 'number' && ms >= 0 ? ms : undefined;
}

/**
 * Waits before the stream is opened again: 250 ms, doubled each time up to 5 s (or what the server
 * asked for), reset by an event. Failures in a row for longer than `reconnectMs` throw the last one.
 */
class Retry {
  readonly #opts: EventsOptions;
  #attempts = 0;
  #failingSince: number | undefined;

  constructor(opts: EventsOptions) {
    this.#opts = opts;
  }

  reset(): void {
    this.#attempts = 0;
    this.#failingSince = undefined;
  }

  /** `failure`: counts towards giving up (a stream closed with a result, before the task ended, does not). */
  async wait(reason: Error, failure: boolean): Promise<void> {
    if (failure) {
      this.#failingSince ??= Date.now();
      if (Date.now() - this.#failingSince > (this.#opts.reconnectMs ?? 60_000)) throw reason;
    }
    const backoff = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** this.#attempts++);
    const delayMs = Math.max(backoff, retryAfterOf(reason) ?? 0);
    this.#opts.onReconnect?.(reason, delayMs);
    const signal = this.#opts.signal;
    await sleep(delayMs, undefined, signal === undefined ? {} : { signal }).catch(() =>
      signal?.throwIfAborted(),
    );
  }
}
