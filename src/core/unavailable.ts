import { ProtocolError, ProtocolErrorCode } from './errors.ts';

/**
 * Whether an error means the database cannot be reached right now (down, restarting, failing over, out of
 * connections). The composition root gives src/db's `isUnreachable`: src/http and the revisions may not import src/db.
 */
export type IsDatabaseUnavailable = (err: unknown) => boolean;

/** What a client is told to wait before it retries, in seconds: about what a Postgres restart takes. */
export const RETRY_AFTER_SECONDS = 5;

/**
 * The JSON-RPC error of a request that failed because the database could not be reached: -32603, as
 * for any server fault, but saying that a retry will do (`data.retryAfterMs`), so that a client (or the
 * model behind it) waits and retries instead of giving up.
 */
export function databaseUnavailableError(): ProtocolError {
  return new ProtocolError(
    ProtocolErrorCode.InternalError,
    'The server cannot reach its database right now: retry in a few seconds',
    { retryAfterMs: RETRY_AFTER_SECONDS * 1_000 },
  );
}
