import type { ColumnType } from 'kysely';

export interface TaskSignalsTable {
  task_id: string;
  name: string;
  /** SHA-256 (base64url) of the signal's token: the token itself is never stored here. */
  token_hash: string;
  created_at: ColumnType<Date, Date | string | undefined, Date | string>;
  /** When a wait for it times out (deliveries after it are refused); null: none but the task's TTL. */
  timeout_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  delivered_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** `{ "value": <the delivered JSON> }`. */
  payload: ColumnType<unknown, string | null | undefined, string | null>;
}
