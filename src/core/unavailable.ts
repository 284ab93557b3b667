import { ProtocolError, ProtocolErrorCode } from './errors.ts';

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
