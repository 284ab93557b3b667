import type { TaskRow } from '../../db/tasks.table.ts';
import type { InputRequests, JsonObject, TaskStatus } from '../../core/wire.ts';

/** A task as the protocol sees it; the one place where columns become wire fields. */
export interface TaskView {
  taskId: string;
  status: TaskStatus;
  statusMessage: string | null;
  createdAt: Date;
  lastUpdatedAt: Date;
  ttlMs: number | null;
  pollIntervalMs: number;
  result: JsonObject | null;
  error: JsonObject | null;
  inputRequests: InputRequests | null;
  /** An opaque tag of where the task was created (see TaskTraits). */
  origin: string | null;
  /** The last event the task emitted (0: none); see latestEventSeq for what a reader can get. */
  eventSeq: number;
}

export type TaskViewRow = Pick<
  TaskRow,
  | 'task_id'
  | 'status'
  | 'status_message'
  | 'created_at'
  | 'last_updated_at'
  | 'ttl_ms'
  | 'poll_interval_ms'
  | 'result'
  | 'error'
  | 'origin'
  | 'event_seq'
> & { input_requests?: unknown };

export const TASK_VIEW_COLUMNS = [
  'task_id',
  'status',
  'status_message',
  'created_at',
  'last_updated_at',
  'ttl_ms',
  'poll_interval_ms',
  'result',
  'error',
  'origin',
  'event_seq',
] as const;

export function toTaskView(row: TaskViewRow): TaskView {
  return {
    taskId: row.task_id,
    status: row.status as TaskStatus,
    statusMessage: row.status_message,
    createdAt: row.created_at,
    lastUpdatedAt: row.last_updated_at,
    ttlMs: row.ttl_ms === null ? null : Number(row.ttl_ms),
    pollIntervalMs: row.poll_interval_ms,
    result: (row.result ?? null) as JsonObject | null,
    error: (row.error ?? null) as JsonObject | null,
    inputRequests: (row.input_requests ?? null) as InputRequests | null,
    origin: row.origin,
    eventSeq: row.event_seq,
  };
}

/** The `Task` fields shared by CreateTaskResult, DetailedTask and notifications/tasks. */
export function toWireTask(task: TaskView): JsonObject {
  return {
    taskId: task.taskId,
    status: task.status,
    ...(task.statusMessage === null ? {} : { statusMessage: task.statusMessage }),
    createdAt: task.createdAt.toISOString(),
    lastUpdatedAt: task.lastUpdatedAt.toISOString(),
    ttlMs: task.ttlMs,
    pollIntervalMs: task.pollIntervalMs,
  };
}

/** The `DetailedTask`: the Task plus what its status inlines (inputRequests, result or error). */
export function toDetailedTask(task: TaskView): JsonObject {
  const wire = toWireTask(task);
  switch (task.status) {
    case 'input_required':
      return { ...wire, inputRequests: task.inputRequests ?? {} };
    case 'completed':
      return { ...wire, result: task.result ?? { resultType: 'complete', content: [] } };
    case 'failed':
      return { ...wire, error: task.error ?? { code: -32603, message: 'Internal error' } };
    case 'working':
    case 'cancelled':
      return wire;
  }
}
