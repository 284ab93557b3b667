import type { Context, MiddlewareHandler } from 'hono';
import { ProtocolErrorCode } from '../../core/errors.ts';
import type { AuthResult, Authenticator } from './types.ts';

export interface AuthEnv {
  Variables: { principal: string };
}

export interface AuthMiddlewareOptions {
  /** Undefined: no authentication (loopback development); every request is `principal`. */
  authenticate?: Authenticator | undefined;
  principal?: string;
  /** Where the Protected Resource Metadata lives, advertised in every challenge (OAuth mode). */
  resourceMetadataUrl?: string | undefined;
  requiredScopes?: readonly string[];
}

function quote(value: string): string {
  return `"${value.replace(/["\\]/g, '')}"`;
}

function challenge(
  result: Extract<AuthResult, { ok: false }>,
  opts: AuthMiddlewareOptions,
  hadToken: boolean,
): string {
  const params = ['realm="mcp"'];
  // RFC 6750 §3.1: a request without credentials gets no error code.
  if (hadToken) params.push(`error=${quote(result.error)}`, `error_description=${quote(result.description)}`);
  if (opts.requiredScopes !== undefined && opts.requiredScopes.length > 0) {
    params.push(`scope=${quote(opts.requiredScopes.join(' '))}`);
  }
  if (opts.resourceMetadataUrl !== undefined)
    params.push(`resource_metadata=${quote(opts.resourceMetadataUrl)}`);
  return `Bearer ${params.join(', ')}`;
}

/** Resolves the request's principal (or answers 401/403 with a WWW-Authenticate challenge). */
export function authMiddleware(opts: AuthMiddlewareOptions): MiddlewareHandler<AuthEnv> {
  const { authenticate, principal = 'local' } = opts;
  return async (c: Context<AuthEnv>, next) => {
    if (authenticate === undefined) {
      c.set('principal', principal);
      await next();
      return;
    }
    const authorization = c.req.header('authorization');
    const result = await authenticate(authorization);
    if (!result.ok) {
      // Credentials of another scheme count as none (RFC 6750 §3.1: no error code then).
      c.header('WWW-Authenticate', challenge(result, opts, /^bearer\s/i.test(authorization ?? '')));
      return c.json(
        {
          jsonrpc: '2.0',
          error: {
            code: ProtocolErrorCode.InvalidRequest,
            message: result.status === 403 ? 'Forbidden: insufficient scope' : 'Unauthorized',
          },
        },
        result.status,
      );
    }
    c.set('principal', result.principal);
    await next();
    return;
  };
}
