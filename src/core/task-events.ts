// Task events on the wire (SEP-2694 draft, experimental): the server's own event types, the
// notification that carries an event, and the error for events retention dropped.
import { ProtocolError, ProtocolErrorCode } from './errors.ts';

/** The server's own event types (and the prefix a tool's may not use). */
export const SERVER_EVENT_PREFIX = 'dev.durable-mcp-tasks/';
export const SERVER_EVENTS = {
  /** Content blocks appended to the task's output (ctx.partial), shaped as SEP-2679's partial results. */
  partial: `${SERVER_EVENT_PREFIX}partial`,
  /** An artifact the task finished writing: its resource_link. */
  artifact: `${SERVER_EVENT_PREFIX}artifact`,
  /** The task asked for input: its inputRequests. */
  inputRequired: `${SERVER_EVENT_PREFIX}input_required`,
  /** A finished task's last event, `{ status, statusMessage? }`: made from its row when read, not stored. */
  status: `${SERVER_EVENT_PREFIX}status`,
} as const;

export const TASK_EVENT_NOTIFICATION = 'notifications/tasks/event';
export const META_RELATED_TASK = 'io.modelcontextprotocol/related-task';
/** When the event was written (the draft has no time field: this server's, in `_meta`). */
export const META_EVENT_TIME = 'dev.durable-mcp-tasks/time';
/** tasks/get's `_meta`: the number of the task's last event a reader can get (0: none yet). */
export const META_LATEST_EVENT_SEQ = 'dev.durable-mcp-tasks/latestEventSeq';

/** An event as readers get it. */
export interface WireTaskEvent {
  seq: number;
  type: string;
  payload: Record<string, unknown>;
  createdAt: Date;
}

/** The `notifications/tasks/event` params of one event (SEP-2694). */
export function taskEventParams(taskId: string, event: WireTaskEvent): Record<string, unknown> {
  return {
    taskId,
    seq: event.seq,
    type: event.type,
    payload: event.payload,
    _meta: {
      [META_RELATED_TASK]: { taskId },
      [META_EVENT_TIME]: event.createdAt.toISOString(),
    },
  };
}

/**
 * A message's JSON made once, for a message many streams send as it is (one event to every reader of a
 * task): a transport that writes JSON uses it instead of serializing the message again per stream.
 */
export const SERIALIZED = Symbol('serialized');

export interface Serialized {
  readonly [SERIALIZED]?: string;
}

type EventNotification = { method: string; params: Record<string, unknown> } & Serialized;

/** Each event's message, by the event object (an event is of one task: the object names the message). */
const notifications = new WeakMap<WireTaskEvent, EventNotification>();

/**
 * The `notifications/tasks/event` message of one event, made once per event object (its readers on an
 * instance share the object the shared read gave them), with its JSON (see SERIALIZED).
 */
export function taskEventNotification(taskId: string, event: WireTaskEvent): EventNotification {
  let message = notifications.get(event);
  if (message === undefined) {
    const params = taskEventParams(taskId, event);
    const json = JSON.stringify({ jsonrpc: '2.0', method: TASK_EVENT_NOTIFICATION, params });
    message = { method: TASK_EVENT_NOTIFICATION, params, [SERIALIZED]: json };
    notifications.set(event, message);
  }
  return message;
}

/** SEP-2694's code for events retention dropped. */
export const EVENTS_GONE_CODE = -32010;

/** The events a reader asked for are gone (TASK_EVENT_RETENTION_MS): it can go on from `earliestSeq`. */
export class EventsGoneError extends ProtocolError {
  constructor(
    readonly taskId: string,
    readonly earliestSeq: number,
  ) {
    super(EVENTS_GONE_CODE, 'Task events are no longer available', {
      reason: 'events_gone',
      taskId,
      earliestSeq,
    });
  }
}

/**
 * The instance is shutting down while it streams a task's events: the stream ends without a result, so
 * the client resumes it (on another instance) with its cursor. Sent as an error only when nothing was
 * streamed yet.
 */
export class EventStreamInterruptedError extends ProtocolError {
  constructor() {
    super(
      ProtocolErrorCode.InternalError,
      'The server is shutting down: resume the task event stream with the last seq received',
      { retryAfterMs: 0 },
    );
  }
}
