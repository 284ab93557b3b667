import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from 'jose';
import type { Authenticator } from './types.ts';

export interface OAuthOptions {
  issuer: string;
  /** The audience tokens must be issued for: this server's resource identifier (RFC 8707). */
  audience: string;
  jwksUrl: string;
  /** A claim that qualifies the subject, e.g. `tenant`: the principal becomes `<tenant>/<sub>`. */
  tenantClaim?: string | undefined;
  /** Scopes every request needs (403 insufficient_scope otherwise). */
  requiredScopes?: readonly string[];
  /** Allowed clock skew in seconds. */
  clockToleranceSeconds?: number;
}

function scopesOf(payload: JWTPayload): string[] {
  const scope = payload.scope ?? payload.scp;
  if (typeof scope === 'string') return scope.split(' ').filter((s) => s !== '');
  if (Array.isArray(scope)) return scope.filter((s): s is string => typeof s === 'string');
  return [];
}

/** OAuth 2.1 resource server: JWT access tokens verified against the issuer's JWKS, issuer and audience checked. */
export function oauthAuthenticator(opts: OAuthOptions): Authenticator {
  const jwks = createRemoteJWKSet(new URL(opts.jwksUrl), {
    cooldownDuration: 30_000,
    timeoutDuration: 5_000,
  });
  const required = opts.requiredScopes ?? [];
  return async (authorization) => {
    const m = authorization === undefined ? null : /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i.exec(authorization);
    if (m === null) {
      return { ok: false, status: 401, error: 'invalid_request', description: 'A bearer token is required' };
    }
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(m[1]!, jwks, {
        issuer: opts.issuer,
        audience: opts.audience,
        clockTolerance: opts.clockToleranceSeconds ?? 30,
        // Asymmetric algorithms only (the key set is public), and tokens must expire.
        algorithms: [
          'RS256',
          'RS384',
          'RS512',
          'PS256',
          'PS384',
          'PS512',
          'ES256',
          'ES384',
          'ES512',
          'EdDSA',
        ],
        requiredClaims: ['exp'],
      }));
    } catch (err) {
      const description =
        err instanceof errors.JWTExpired
          ? 'The token has expired'
          : err instanceof errors.JWTClaimValidationFailed
            ? `The token's ${err.claim} claim is not accepted`
            : 'The token is not valid';
      return { ok: false, status: 401, error: 'invalid_token', description };
    }
    if (typeof payload.sub !== 'string' || payload.sub === '') {
      return { ok: false, status: 401, error: 'invalid_token', description: 'The token has no subject' };
    }
    let principal = payload.sub;
    if (opts.tenantClaim !== undefined) {
      const tenant = payload[opts.tenantClaim];
      // A slash in the tenant would make `<tenant>/<sub>` ambiguous (a/b + c vs a + b/c).
      if (typeof tenant !== 'string' || tenant === '' || tenant.includes('/')) {
        return {
          ok: false,
          status: 401,
          error: 'invalid_token',
          description: `The token has no ${opts.tenantClaim} claim`,
        };
      }
      principal = `${tenant}/${payload.sub}`;
    }
    const scopes = scopesOf(payload);
    const missing = required.filter((s) => !scopes.includes(s));
    if (missing.length > 0) {
      return {
        ok: false,
        status: 403,
        error: 'insufficient_scope',
        description: `Missing scope: ${missing.join(' ')}`,
      };
    }
    return { ok: true, principal, scopes };
  };
}
