import type { MiddlewareHandler } from 'hono';
import { ProtocolErrorCode } from '../protocol/errors.ts';

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

export interface OriginOptions {
  /** Exact origins (scheme://host[:port]) accepted besides loopback ones. */
  allowedOrigins?: readonly string[];
}

/**
 * DNS-rebinding protection: a request carrying an Origin that is neither a loopback origin nor on the
 * allow-list gets 403 with a JSON-RPC error without id.
 */
export function originCheck({ allowedOrigins = [] }: OriginOptions = {}): MiddlewareHandler {
  const allowed = new Set(allowedOrigins);
  return async (c, next) => {
    const origin = c.req.header('origin');
    if (origin !== undefined && !allowed.has(origin) && !isLoopbackOrigin(origin)) {
      return c.json(
        {
          jsonrpc: '2.0',
          error: { code: ProtocolErrorCode.InvalidRequest, message: 'Forbidden: Origin not allowed' },
        },
        403,
      );
    }
    await next();
    return undefined;
  };
}

function isLoopbackOrigin(origin: string): boolean {
  try {
    const url = new URL(origin);
    return (url.protocol === 'http:' || url.protocol === 'https:') && LOOPBACK_HOSTS.has(url.hostname);
  } catch {
    return false;
  }
}
