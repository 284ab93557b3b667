import type { ColumnType } from 'kysely';

/** A dashboard sign-in: the SHA-256 of its cookie, its CSRF token, when it ends. */
export interface DashboardSessionsTable {
  token_hash: string;
  csrf: string;
  expires_at: Date;
  /** The name the operator gave at sign-in, for the audit trail (null: none given). */
  operator: ColumnType<string | null, string | null | undefined, string | null>;
}
