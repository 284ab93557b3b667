import type { ColumnType, Generated } from 'kysely';

type Json = ColumnType<unknown, string, string>;
type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface SessionsTable {
  session_id: string;
  principal: string;
  protocol_version: string;
  client_capabilities: Json;
  client_info: Json;
  log_level: string | null;
  created_at: Timestamp;
  last_seen_at: Timestamp;
  ended_at: NullableTimestamp;
  /** The number of the session's last stream event (each session numbers its own: see SessionEventsTable.seq). */
  event_seq: ColumnType<string, never, string>;
}

export interface SessionSubscriptionsTable {
  session_id: string;
  uri: string;
}

export interface SessionEventsTable {
  /** bigserial: pg returns it as a string. */
  event_id: ColumnType<string, never, never>;
  /**
   * The event's number in its session (bigint, as a string): its SSE id. Per session, so that ids say
   * nothing of other sessions' traffic.
   */
  seq: string;
  session_id: string;
  stream_id: string;
  /** null: a priming event (no message). */
  message: ColumnType<unknown, string | null, string | null>;
  created_at: Generated<Date>;
}

export interface SessionResponsesTable {
  session_id: string;
  request_id: string;
  /** Null while the server waits for the answer to its request. */
  response: Json | null;
  created_at: Generated<Date>;
}

export interface SessionInputDeliveriesTable {
  session_id: string;
  task_id: string;
  key: string;
  /** The stream that sent the request (its claim ends with the stream). */
  stream_id: string;
  sent_at: Generated<Date>;
}
