import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

type Json = ColumnType<unknown, string, string>;
type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface TasksTable {
  task_id: string;
  principal: string;
  tool_name: string;
  arguments: Json;
  prepared: ColumnType<unknown, string | null | undefined, string | null>;
  client_capabilities: Json;
  /** An opaque tag of where the task was created (a 2025-11-25 session id), stored and shown only. */
  origin: ColumnType<string | null, string | null | undefined, string | null>;
  /** A tool result with isError ends the task `failed` (set at creation: 2025-11-25 says so). */
  tool_error_fails: ColumnType<boolean, boolean | undefined, boolean>;
  status: string;
  status_message: string | null;
  result: ColumnType<unknown, string | null | undefined, string | null>;
  error: ColumnType<unknown, string | null | undefined, string | null>;
  /** bigint: pg returns it as a string. */
  ttl_ms: ColumnType<string | null, number | null, number | null>;
  poll_interval_ms: number;
  created_at: Timestamp;
  last_updated_at: Timestamp;
  expires_at: NullableTimestamp;
  attempt: Generated<number>;
  /** The last event number given (0: none yet), and the events' payload bytes so far (see task_events). */
  event_seq: Generated<number>;
  /** bigint: pg returns it as a string. */
  event_bytes: ColumnType<string, never, never>;
  /** Handler crashes so far: the retry budget. */
  failures: Generated<number>;
  leased_by: string | null;
  lease_expires_at: NullableTimestamp;
  cancel_requested_at: NullableTimestamp;
  /** Set while the task is paused: its attempts ran out under `onExhausted: 'pause'` (see tools/retry.ts). */
  paused_at: NullableTimestamp;
  /** Set while a pause its owner asked for (`tasks/pause`) waits for the running attempt's next checkpoint. */
  pause_requested_at: NullableTimestamp;
  /** Steering messages sent to the task so far (`tasks/steer`): the last one's number. */
  steering_sent: Generated<number>;
  /** The tool's secret argument paths (`defineTool({ secretArguments })`), redacted in operator views. */
  secret_arguments: ColumnType<
    string[] | null,
    readonly string[] | null | undefined,
    readonly string[] | null
  >;
  /** W3C trace context of the creating request ({traceparent, tracestate?, baggage?}), or null. */
  trace_context: ColumnType<unknown, string | null | undefined, string | null>;
  /** A map item (ctx.map): the task whose handler called the map, the map's name, the item's index. */
  parent_task_id: ColumnType<string | null, string | null | undefined, string | null>;
  map_name: ColumnType<string | null, string | null | undefined, string | null>;
  map_index: ColumnType<number | null, number | null | undefined, number | null>;
  /** The tool's concurrency key for this task (`defineTool({ concurrency })`), and its limit. */
  concurrency_key: ColumnType<string | null, string | null | undefined, string | null>;
  concurrency_limit: ColumnType<number | null, number | null | undefined, number | null>;
  /** The create's idempotency key (hashed), unique per principal, and what it was for (tool, arguments). */
  idempotency_key: ColumnType<string | null, string | null | undefined, string | null>;
  idempotency_fingerprint: ColumnType<string | null, string | null | undefined, string | null>;
  /** The tool's rate limit for this task (`defineTool({ rateLimit })`): its key, starts per window, window. */
  rate_key: ColumnType<string | null, string | null | undefined, string | null>;
  rate_limit: ColumnType<number | null, number | null | undefined, number | null>;
  rate_per_ms: ColumnType<number | null, number | null | undefined, number | null>;
  /** The tool's debounce key (`defineTool({ debounce })`): later calls with it replace a task not yet started. */
  debounce_key: ColumnType<string | null, string | null | undefined, string | null>;
  /** No leg starts before this (a debounced task waits out its burst). */
  run_after: NullableTimestamp;
  /** The tool's timeoutMs (bigint: pg returns it as a string), and the deadline it sets (creation + it). */
  timeout_ms: ColumnType<string | null, number | null | undefined, number | null>;
  deadline_at: NullableTimestamp;
}

export type TaskRow = Selectable<TasksTable>;
export type NewTaskRow = Insertable<TasksTable>;
