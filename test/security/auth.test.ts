import { createServer, type Server } from 'node:http';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { securityFromConfig } from '../../src/http/auth/from-config.ts';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import type { ServerProcess } from '../../src/process/start.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { startTestProcess } from '../helpers/server-process.ts';

const ISSUER = 'http://127.0.0.1/issuer';
let tdb: TestDatabase;
let jwksServer: Server;
let jwksUrl: string;
let signingKey: CryptoKey;
let otherKey: CryptoKey;
const AUDIENCE = 'https://mcp.example.test/mcp';

beforeAll(async () => {
  tdb = await createTestDatabase();
  const pair = await generateKeyPair('RS256');
  signingKey = pair.privateKey;
  otherKey = (await generateKeyPair('RS256')).privateKey;
  const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  // A real JWKS endpoint, served by the test over a real socket.
  jwksServer = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((r) => jwksServer.listen(0, '127.0.0.1', r));
  jwksUrl = `http://127.0.0.1:${(jwksServer.address() as { port: number }).port}/jwks.json`;
});
afterAll(async () => {
  await new Promise((r) => jwksServer?.close(r));
  await tdb?.drop();
});

async function token(
  claims: Record<string, unknown> = {},
  opts: { key?: CryptoKey; expiresIn?: string | number; audience?: string; issuer?: string } = {},
) {
  return new SignJWT({ scope: 'mcp:tools', ...claims })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
    .setSubject((claims.sub as string | undefined) ?? 'user-1')
    .setIssuer(opts.issuer ?? ISSUER)
    .setAudience(opts.audience ?? AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(opts.expiresIn ?? '5m')
    .sign(opts.key ?? signingKey);
}

const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

describe('OAuth 2.1 resource server mode', () => {
  let rt: ServerProcess & { url: string };
  let mcp: RawMcp;
  beforeAll(async () => {
    rt = await startTestProcess({
      databaseUrl: tdb.url,
      env: {
        AUTH_MODE: 'oauth',
        OAUTH_ISSUER: ISSUER,
        OAUTH_AUDIENCE: AUDIENCE,
        OAUTH_JWKS_URL: jwksUrl,
        OAUTH_TENANT_CLAIM: 'tenant',
        OAUTH_REQUIRED_SCOPES: 'mcp:tools',
        PUBLIC_URL: 'https://mcp.example.test',
      },
    });
    mcp = new RawMcp(rt.url);
  });
  afterAll(async () => {
    await rt?.stop();
  });

  it('serves Protected Resource Metadata (RFC 9728)', async () => {
    for (const path of [
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/mcp',
    ]) {
      const res = await fetch(new URL(path, rt.url));
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        resource: AUDIENCE,
        authorization_servers: [ISSUER],
        bearer_methods_supported: ['header'],
        scopes_supported: ['mcp:tools'],
        resource_name: 'durable-mcp-tasks',
      });
    }
  });

  it('answers a request without a token with 401 and a challenge pointing at the metadata', async () => {
    const reply = await mcp.request('server/discover');
    expect(reply.status).toBe(401);
    expect(reply.headers.get('www-authenticate')).toBe(
      'Bearer realm="mcp", scope="mcp:tools", resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp"',
    );
  });

  it.each([
    [
      'expired',
      () => token({ tenant: 't1' }, { expiresIn: Math.floor(Date.now() / 1000) - 120 }),
      'The token has expired',
    ],
    [
      'for another audience',
      () => token({ tenant: 't1' }, { audience: 'https://other.example/mcp' }),
      "The token's aud claim is not accepted",
    ],
    [
      'from another issuer',
      () => token({ tenant: 't1' }, { issuer: 'http://evil/issuer' }),
      "The token's iss claim is not accepted",
    ],
    ['signed with another key', () => token({ tenant: 't1' }, { key: otherKey }), 'The token is not valid'],
    ['without the tenant claim', () => token({}), 'The token has no tenant claim'],
    ['malformed', async () => 'not.a.jwt', 'The token is not valid'],
  ])('rejects a token %s with 401 invalid_token', async (_what, make, description) => {
    const reply = await mcp.request('server/discover', {}, { headers: bearer(await make()) });
    expect(reply.status).toBe(401);
    expect(reply.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect(reply.headers.get('www-authenticate')).toContain(
      `error_description="${description.replace(/"/g, '')}"`,
    );
  });

  it('rejects a token without exp, and a tenant that would make principals ambiguous', async () => {
    const noExp = await new SignJWT({ scope: 'mcp:tools', tenant: 't1' })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setSubject('user-1')
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .sign(signingKey);
    expect((await mcp.request('server/discover', {}, { headers: bearer(noExp) })).status).toBe(401);
    const slashed = await token({ tenant: 'a/b', sub: 'c' });
    expect((await mcp.request('server/discover', {}, { headers: bearer(slashed) })).status).toBe(401);
  });

  it('accepts the bearer scheme in any case', async () => {
    const t = await token({ tenant: 't1' });
    expect(
      (await mcp.request('server/discover', {}, { headers: { authorization: `bearer ${t}` } })).status,
    ).toBe(200);
  });

  it('rejects a token without the required scope with 403 insufficient_scope', async () => {
    const reply = await mcp.request(
      'server/discover',
      {},
      { headers: bearer(await token({ tenant: 't1', scope: 'other' })) },
    );
    expect(reply.status).toBe(403);
    expect(reply.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
  });

  it('accepts a valid token; the principal is tenant/subject, and tasks belong to it', async () => {
    const alice = bearer(await token({ tenant: 'acme', sub: 'alice' }));
    const created = await mcp.result(
      'tools/call',
      { name: 'analyze_numbers', arguments: { count: 3 } },
      { headers: alice },
    );
    const row = await tdb.db
      .selectFrom('tasks')
      .select('principal')
      .where('task_id', '=', created.taskId)
      .executeTakeFirstOrThrow();
    expect(row.principal).toBe('acme/alice');
    // The same subject in another tenant is another principal.
    const otherTenant = bearer(await token({ tenant: 'globex', sub: 'alice' }));
    expect(await mcp.error('tasks/get', { taskId: created.taskId }, { headers: otherTenant })).toMatchObject({
      code: -32602,
      message: 'Failed to retrieve task: Task not found',
    });
    expect((await mcp.result('tasks/get', { taskId: created.taskId }, { headers: alice })).taskId).toBe(
      created.taskId,
    );
  });
});

describe('static bearer tokens', () => {
  let rt: ServerProcess & { url: string };
  let mcp: RawMcp;
  beforeAll(async () => {
    rt = await startTestProcess({
      databaseUrl: tdb.url,
      env: {
        AUTH_MODE: 'bearer',
        AUTH_TOKENS: `alice=${hashToken('alice-secret')}, bob=${hashToken('bob-secret')}`,
      },
    });
    mcp = new RawMcp(rt.url);
  });
  afterAll(async () => {
    await rt?.stop();
  });

  it('maps a configured token to its principal and rejects any other', async () => {
    expect((await mcp.request('server/discover', {}, { headers: bearer('alice-secret') })).status).toBe(200);
    for (const headers of [
      {},
      bearer('alice-secret2'),
      bearer(hashToken('alice-secret')),
      { authorization: 'Basic YWxpY2U6eA==' },
    ]) {
      const reply = await mcp.request('server/discover', {}, { headers });
      expect(reply.status).toBe(401);
      expect(reply.headers.get('www-authenticate')).toMatch(/^Bearer realm="mcp"/);
      expect(reply.text).not.toContain('alice-secret');
    }
  });
});

describe('the liveness probe', () => {
  it('answers GET /healthz without a token and whatever the Host, while /mcp still wants both', async () => {
    const rt = await startTestProcess({
      databaseUrl: tdb.url,
      env: { AUTH_MODE: 'bearer', AUTH_TOKENS: `alice=${hashToken('alice-secret')}` },
    });
    try {
      const { request } = await import('node:http');
      const get = (pathname: string, host: string) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = request(new URL(pathname, rt.url), { headers: { host } }, (res) => {
            let body = '';
            res.on('data', (d: Buffer) => (body += d.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          });
          req.on('error', reject);
          req.end();
        });
      expect(await get('/healthz', '10.1.2.3:3000')).toEqual({ status: 200, body: '{"status":"ok"}' });
      expect((await get('/healthz', new URL(rt.url).host)).status).toBe(200);
      expect((await new RawMcp(rt.url).request('server/discover')).status).toBe(401);
    } finally {
      await rt.stop();
    }
  });
});

describe('configuration safety', () => {
  it('refuses AUTH_MODE=none on a non-loopback address', () => {
    expect(() => securityFromConfig(loadConfig({ HOST: '0.0.0.0' }), 3000)).toThrow(
      /only allowed on a loopback HOST/,
    );
    expect(() => securityFromConfig(loadConfig({ HOST: '127.0.0.1' }), 3000)).not.toThrow();
  });

  it('refuses bearer mode without tokens and oauth mode without an issuer', () => {
    expect(() => securityFromConfig(loadConfig({ AUTH_MODE: 'bearer', HOST: '0.0.0.0' }), 3000)).toThrow(
      /AUTH_TOKENS/,
    );
    expect(() => securityFromConfig(loadConfig({ AUTH_MODE: 'oauth', HOST: '0.0.0.0' }), 3000)).toThrow(
      /OAUTH_ISSUER/,
    );
  });
});
