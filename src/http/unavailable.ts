import type { Context } from 'hono';
import { routePath } from 'hono/route';
import { RETRY_AFTER_SECONDS } from '../core/unavailable.ts';
import type { Logger } from '../log.ts';

/**
 * The answer to a request that failed because the database could not be reached: 503 with Retry-After
 * and `body`, logged as a warning. Neither the request nor the server is at fault, and the same request
 * succeeds once the database is back. The log names the route, not the path: a signal's path holds its
 * token, a credential.
 */
export function databaseUnavailable(c: Context, log: Logger, err: unknown, body: object): Response {
  log.warn('database unavailable', { method: c.req.method, route: routePath(c, -1), error: String(err) });
  return c.json(body, 503, { 'Retry-After': String(RETRY_AFTER_SECONDS) });
}
