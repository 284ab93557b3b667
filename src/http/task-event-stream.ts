// A task's events as a plain text/event-stream, for curl and browsers (the events endpoint, the
// dashboard's event log): one SSE event per task event, its seq as the SSE id and its
// `notifications/tasks/event` params as the data, with no event name (an EventSource's onmessage gets
// each). A retry hint first, keep-alive comments while nothing happens, and the end of the response
// after the task's final status event. A reader resumes with Last-Event-ID (what an EventSource sends
// when it reconnects) or `?after=N`.
import type { Context } from 'hono';
import { ProtocolErrorCode, QuotaExceededError, RATE_LIMITED_CODE } from '../core/errors.ts';
import type { Metrics } from '../core/metrics.ts';
import { SSE_HEADERS } from '../core/sse.ts';
import { EventsGoneError, taskEventParams, type WireTaskEvent } from '../core/task-events.ts';
import { coerceError, type Logger } from '../log.ts';
import type { TaskEventReader } from '../tasks/event-follower.ts';
import { isTerminal } from '../tasks/status.ts';
import { latestEventSeq } from '../tasks/store/events.ts';
import type { TaskView } from '../tasks/store/view.ts';

/** What a browser waits before it reconnects a stream that broke (the SSE `retry` field). */
export const EVENT_STREAM_RETRY_MS = 3_000;

/** The largest cursor taken (tasks/stream's bound: a seq is a Postgres integer). */
const MAX_SEQ = 2_147_483_647;

/** How many events the response holds before the reader waits for the client to take them. */
const QUEUED_EVENTS = 64;

export interface TaskEventStreamOptions {
  reader: Pick<TaskEventReader, 'checkCursor' | 'follow' | 'admit'>;
  /** A keep-alive comment this often (SSE_KEEPALIVE_MS), so that proxies keep an idle stream open. */
  keepAliveMs: number;
  /** Ends every stream when the process stops: the client resumes with its cursor, on any instance. */
  shutdown?: AbortSignal | undefined;
  log: Logger;
  metrics?: Metrics | undefined;
}

/** The task whose events are streamed: the caller found it and checked who may read it. */
export type StreamedTask = Pick<TaskView, 'taskId' | 'status' | 'eventSeq'> & { principal: string };

/** A JSON-RPC-shaped error body (as the endpoint's other refusals: 401, 503). */
const errorBody = (code: number, message: string, data?: unknown) => ({
  jsonrpc: '2.0' as const,
  error: data === undefined ? { code, message } : { code, message, data },
});

/**
 * The request's cursor: Last-Event-ID (an EventSource sends it on reconnecting, while its URL keeps the
 * first `after`), else `?after=`; none means from the earliest event kept. A string when it is not a seq.
 */
export function requestedCursor(c: Context): number | undefined | { refused: string } {
  const header = c.req.header('last-event-id');
  const [name, value] =
    header !== undefined && header !== '' ? ['Last-Event-ID', header] : ['after', c.req.query('after')];
  if (value === undefined) return undefined;
  const seq = /^\d{1,10}$/.test(value.trim()) ? Number(value.trim()) : NaN;
  if (seq <= MAX_SEQ) return seq;
  return {
    refused: `Invalid ${name} ${JSON.stringify(value.slice(0, 32))}: the seq of the last event received, an integer from 0`,
  };
}

/**
 * The answer to a request for `task`'s events: 400 for a cursor that is not one (or is past the task's
 * last event), 410 when retention dropped events after it, 204 when a finished task has nothing left
 * after it (an EventSource stops reconnecting), else the stream.
 */
export async function taskEventStream(
  c: Context,
  task: StreamedTask,
  opts: TaskEventStreamOptions,
): Promise<Response> {
  const after = requestedCursor(c);
  if (typeof after === 'object')
    return c.json(errorBody(ProtocolErrorCode.InvalidParams, after.refused), 400);
  const latest = latestEventSeq(task);
  if (after !== undefined && after > latest) {
    const message = `The cursor (${after}) is past the task's last event (${latest})`;
    return c.json(errorBody(ProtocolErrorCode.InvalidParams, message), 400);
  }
  let range;
  try {
    range = await opts.reader.checkCursor(task.taskId, after);
  } catch (err) {
    if (!(err instanceof EventsGoneError)) throw err;
    return c.json(errorBody(err.code, err.message, err.data), 410);
  }
  // Without a cursor: from the earliest event still kept.
  const from = after ?? Math.max(0, (range?.earliest ?? 1) - 1);
  if (isTerminal(task.status) && from >= latest) return c.body(null, 204);
  // (A HEAD has no body to follow the task in: Hono answers it with a GET's headers.)
  if (c.req.method === 'HEAD') return c.body(null, 200, SSE_HEADERS);
  let release: () => void;
  try {
    release = opts.reader.admit(task.principal);
  } catch (err) {
    if (!(err instanceof QuotaExceededError)) throw err;
    return c.json(errorBody(RATE_LIMITED_CODE, err.message, { limit: err.limit }), 429);
  }
  return c.body(follow(task, from, opts, release), 200, SSE_HEADERS);
}

/** The response body: the follower's events as they come, until the final status or the client leaves. */
function follow(
  task: StreamedTask,
  after: number,
  opts: TaskEventStreamOptions,
  release: () => void,
): ReadableStream<Uint8Array> {
  const body = new SseBody();
  const signal =
    opts.shutdown === undefined ? body.gone.signal : AbortSignal.any([body.gone.signal, opts.shutdown]);
  // A shutdown while the client is slow to read: the write that waits for it gives up.
  signal.addEventListener('abort', () => body.release(), { once: true });
  body.enqueue(`retry: ${EVENT_STREAM_RETRY_MS}\n\n`);
  const keepAlive = setInterval(() => body.enqueue(':\n\n'), opts.keepAliveMs);
  const send = async (event: WireTaskEvent) => {
    const data = JSON.stringify(taskEventParams(task.taskId, event));
    await body.write(`id: ${event.seq}\ndata: ${data}\n\n`);
    opts.metrics?.taskEventsSent.inc();
  };
  void opts.reader
    .follow({ taskId: task.taskId, principal: task.principal, after, signal, send })
    .catch((err: unknown) => {
      // The headers are sent: the stream ends, and the client's reconnection gets the answer (410, 503).
      opts.log.warn('task event stream ended early', {
        taskId: task.taskId,
        error: coerceError(err).message,
      });
    })
    .finally(() => {
      release();
      clearInterval(keepAlive);
      body.close();
    });
  return body.stream;
}

/** A streamed response body that makes its writer wait while the client is slow to read. */
class SseBody {
  /** Aborts when the client goes away. */
  readonly gone = new AbortController();
  readonly stream: ReadableStream<Uint8Array>;
  readonly #encoder = new TextEncoder();
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  #waiting: (() => void)[] = [];
  #released = false;

  constructor() {
    this.stream = new ReadableStream<Uint8Array>(
      {
        start: (controller) => void (this.#controller = controller),
        pull: () => this.#drained(),
        cancel: () => {
          this.gone.abort(new Error('client closed the stream'));
          this.#drained();
        },
      },
      { highWaterMark: QUEUED_EVENTS },
    );
  }

  /** Queues `text`; resolves once the client has room for more (or the body was released). */
  async write(text: string): Promise<void> {
    this.enqueue(text);
    while ((this.#controller?.desiredSize ?? 1) <= 0 && !this.gone.signal.aborted && !this.#released) {
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
  }

  /** Queues `text` without waiting (a retry hint, a keep-alive: a few bytes). */
  enqueue(text: string): void {
    if (this.gone.signal.aborted || this.#controller === undefined) return;
    try {
      this.#controller.enqueue(this.#encoder.encode(text));
    } catch {
      this.gone.abort(new Error('stream closed'));
      this.#drained();
    }
  }

  /** Stops waiting for the client: writes return at once from now on. */
  release(): void {
    this.#released = true;
    this.#drained();
  }

  #drained(): void {
    for (const resolve of this.#waiting.splice(0)) resolve();
  }

  close(): void {
    if (this.gone.signal.aborted) return;
    try {
      this.#controller?.close();
    } catch {
      // already closed by the client
    }
  }
}
