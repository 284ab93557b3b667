import { createHash, timingSafeEqual } from 'node:crypto';
import { AuthConfigError, type Authenticator } from './types.ts';

/** `sha256(token)` as lowercase hex: how tokens are configured (the tokens themselves are never stored). */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * Parses `principal=sha256hex,principal2=sha256hex`. Each principal may have several tokens (rotation).
 */
export function parseTokenTable(spec: string): Array<{ principal: string; hash: Buffer }> {
  const entries = spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((entry) => {
      const eq = entry.lastIndexOf('=');
      const principal = entry.slice(0, eq).trim();
      const hex = entry
        .slice(eq + 1)
        .trim()
        .toLowerCase();
      if (eq <= 0 || principal === '' || !/^[0-9a-f]{64}$/.test(hex)) {
        throw new AuthConfigError('AUTH_TOKENS entries must be principal=<sha256 hex of the token>');
      }
      return { principal, hash: Buffer.from(hex, 'hex') };
    });
  if (entries.length === 0) throw new AuthConfigError('AUTH_MODE=bearer needs AUTH_TOKENS');
  return entries;
}

/** Static bearer tokens mapped to principals; hashes compared in constant time, every entry every time. */
export function staticTokenAuthenticator(spec: string): Authenticator {
  const table = parseTokenTable(spec);
  return async (authorization) => {
    const m = authorization === undefined ? null : /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i.exec(authorization);
    if (m === null) {
      return { ok: false, status: 401, error: 'invalid_request', description: 'A bearer token is required' };
    }
    const given = createHash('sha256').update(m[1]!, 'utf8').digest();
    let principal: string | undefined;
    for (const entry of table) {
      if (timingSafeEqual(given, entry.hash) && principal === undefined) principal = entry.principal;
    }
    return principal === undefined
      ? { ok: false, status: 401, error: 'invalid_token', description: 'The token is not valid' }
      : { ok: true, principal };
  };
}
