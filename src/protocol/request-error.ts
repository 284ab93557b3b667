import { toProtocolError, type ProtocolError } from '../core/errors.ts';
import { databaseUnavailableError, type IsDatabaseUnavailable } from '../core/unavailable.ts';
import type { Logger } from '../log.ts';

/**
 * The protocol error a request's failure is answered with, in every revision: an unreachable database
 * says to retry (a warning: neither the request nor the server is at fault); any other unknown error is
 * -32603, its cause logged as an error.
 */
export function toRequestError(
  err: unknown,
  {
    isDatabaseUnavailable,
    log,
    method,
  }: { isDatabaseUnavailable: IsDatabaseUnavailable; log: Logger; method: string },
): ProtocolError {
  if (isDatabaseUnavailable(err)) {
    log.warn('database unavailable', { method, error: String(err) });
    return databaseUnavailableError();
  }
  return toProtocolError(err, (cause) =>
    log.error('request failed', { method, error: String(cause), stack: (cause as Error).stack }),
  );
}
