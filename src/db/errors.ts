/**
 * Whether an error means the database could not be reached or dropped the connection (retryable), as
 * opposed to a statement the database refused (deterministic: retrying gives the same answer).
 */
export function isConnectionError(err: unknown): boolean {
  if (isRefusedStartupParameter(err)) return false;
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = typeof e?.message === 'string' ? e.message : '';
  return (
    code.startsWith('08') || // connection exception
    ['57P01', '57P02', '57P03', '53300'].includes(code) || // admin/crash shutdown, cannot connect now, too many connections
    ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH'].includes(code) ||
    // pg's, pg-pool's, and Kysely's for a connection it dropped after such an error.
    /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Postgres connection has been discarded/i.test(
      message,
    )
  );
}

/**
 * Whether a pooler refused a startup parameter (PgBouncer: 08P01 "unsupported startup parameter:
 * options"): a setting to change, not an outage to wait out.
 */
export function isRefusedStartupParameter(err: unknown): boolean {
  const message = (err as { message?: unknown } | null)?.message;
  return typeof message === 'string' && /unsupported startup parameter/i.test(message);
}
