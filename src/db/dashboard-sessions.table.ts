/** A dashboard sign-in: the SHA-256 of its cookie, its CSRF token, when it ends. */
export interface DashboardSessionsTable {
  token_hash: string;
  csrf: string;
  expires_at: Date;
}
