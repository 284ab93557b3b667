import type { MiddlewareHandler } from 'hono';
import { ProtocolErrorCode } from '../core/errors.ts';

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

export interface HostOptions {
  /** Accepted Host names (port ignored); empty: no Host check (e.g. behind a proxy that sets it). */
  allowedHosts?: readonly string[];
}

/** DNS-rebinding protection for the Host header: an unexpected Host gets 403. */
export function hostCheck({ allowedHosts = [] }: HostOptions = {}): MiddlewareHandler {
  const allowed = new Set(allowedHosts.map((h) => h.toLowerCase()));
  return async (c, next) => {
    if (allowed.size > 0) {
      const host = c.req.header('host') ?? '';
      const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]!;
      if (!allowed.has(name.toLowerCase())) {
        return c.json(
          {
            jsonrpc: '2.0',
            error: { code: ProtocolErrorCode.InvalidRequest, message: 'Forbidden: Host not allowed' },
          },
          403,
        );
      }
    }
    await next();
    return undefined;
  };
}

export const LOOPBACK_HOST_NAMES = [...LOOPBACK_HOSTS];
