/**
 * An OAuth authorization server as a resource server sees one: its signing keys on a real JWKS endpoint
 * and RS256 access tokens it signs. `env` puts a runtime in AUTH_MODE=oauth against it, the mode in which
 * the server also serves its RFC 9728 metadata (`/.well-known/oauth-protected-resource…`).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

const ISSUER = 'http://127.0.0.1/test-issuer';
const AUDIENCE = 'https://mcp.example.test/mcp';

export interface TestIssuer {
  /** AUTH_MODE=oauth with this issuer, its JWKS and the audience of its tokens. */
  env: Record<string, string>;
  /** A fresh access token for `subject` (the principal), valid for ten minutes. */
  token(subject?: string): Promise<string>;
  close(): Promise<void>;
}

export async function startTestIssuer(): Promise<TestIssuer> {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const jwks = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  const { port } = jwks.address() as AddressInfo;
  return {
    env: {
      AUTH_MODE: 'oauth',
      OAUTH_ISSUER: ISSUER,
      OAUTH_AUDIENCE: AUDIENCE,
      OAUTH_JWKS_URL: `http://127.0.0.1:${port}/jwks.json`,
    },
    token: (subject = 'user-1') =>
      new SignJWT({})
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setSubject(subject)
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setIssuedAt()
        .setExpirationTime('10m')
        .sign(privateKey),
    close: () => new Promise<void>((resolve) => jwks.close(() => resolve())),
  };
}
