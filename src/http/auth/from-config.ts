import { publicOrigin, type Config } from '../../config.ts';
import type { ResourceMetadata } from '../app.ts';
import { LOOPBACK_HOST_NAMES } from '../origin.ts';
import type { AuthMiddlewareOptions } from './middleware.ts';
import { oauthAuthenticator } from './oauth.ts';
import { staticTokenAuthenticator } from './static-tokens.ts';
import { AuthConfigError } from './types.ts';

export function isLoopbackHost(host: string): boolean {
  return ['127.0.0.1', '::1', 'localhost'].includes(host) || host.startsWith('127.');
}

/** Authentication and Host checks from the configuration; refuses unsafe combinations at start-up. */
export function securityFromConfig(
  config: Config,
  port: number,
): { auth: AuthMiddlewareOptions; resourceMetadata: ResourceMetadata | undefined; allowedHosts: string[] } {
  const base = publicOrigin(config, port);
  const listed = config.ALLOWED_HOSTS.split(',')
    .map((h) => h.trim())
    .filter((h) => h !== '');
  const allowedHosts = listed.length > 0 ? listed : isLoopbackHost(config.HOST) ? LOOPBACK_HOST_NAMES : [];
  switch (config.AUTH_MODE) {
    case 'none':
      if (!isLoopbackHost(config.HOST)) {
        throw new AuthConfigError(`AUTH_MODE=none is only allowed on a loopback HOST (got ${config.HOST})`);
      }
      return { auth: { principal: config.PRINCIPAL }, resourceMetadata: undefined, allowedHosts };
    case 'bearer':
      return {
        auth: { authenticate: staticTokenAuthenticator(config.AUTH_TOKENS) },
        resourceMetadata: undefined,
        allowedHosts,
      };
    case 'oauth': {
      if (config.OAUTH_ISSUER === undefined || config.OAUTH_JWKS_URL === undefined) {
        throw new AuthConfigError('AUTH_MODE=oauth needs OAUTH_ISSUER and OAUTH_JWKS_URL');
      }
      const resource = `${base}/mcp`;
      const requiredScopes = config.OAUTH_REQUIRED_SCOPES.split(' ').filter((s) => s !== '');
      return {
        auth: {
          authenticate: oauthAuthenticator({
            issuer: config.OAUTH_ISSUER,
            audience: config.OAUTH_AUDIENCE ?? resource,
            jwksUrl: config.OAUTH_JWKS_URL,
            tenantClaim: config.OAUTH_TENANT_CLAIM,
            requiredScopes,
          }),
          resourceMetadataUrl: `${base}/.well-known/oauth-protected-resource/mcp`,
          requiredScopes,
        },
        resourceMetadata: {
          // The URL clients use (RFC 9728 §3.3); tokens may name another audience via OAUTH_AUDIENCE.
          resource,
          authorization_servers: [config.OAUTH_ISSUER],
          bearer_methods_supported: ['header'],
          ...(requiredScopes.length > 0 ? { scopes_supported: requiredScopes } : {}),
          resource_name: config.SERVER_NAME,
        },
        allowedHosts,
      };
    }
  }
}
