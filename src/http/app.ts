import { Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from '../log.ts';
import type { Dispatcher } from '../protocol/dispatch.ts';
import { ProtocolErrorCode } from '../protocol/errors.ts';
import { authMiddleware, type AuthEnv, type AuthMiddlewareOptions } from './auth/middleware.ts';
import { mcpPost } from './mcp-route.ts';
import { hostCheck, originCheck } from './origin.ts';

/** RFC 9728 Protected Resource Metadata, served when the server is an OAuth resource server. */
export interface ResourceMetadata {
  resource: string;
  authorization_servers: string[];
  bearer_methods_supported: string[];
  scopes_supported?: string[];
  resource_name?: string;
}

export interface AppOptions {
  dispatcher: Dispatcher;
  log: Logger;
  auth: AuthMiddlewareOptions;
  resourceMetadata?: ResourceMetadata | undefined;
  maxBodyBytes?: number;
  maxJsonDepth?: number;
  allowedOrigins?: readonly string[];
  allowedHosts?: readonly string[];
  keepAliveMs?: number;
  path?: string;
}

/** An error response to a request whose id was not read: no `id` (the 2026-07-28 schema allows no null). */
const error = (code: number, message: string) => ({ jsonrpc: '2.0' as const, error: { code, message } });

/**
 * The MCP endpoint's body limit: a body over `maxBodyBytes` gets a 413 JSON-RPC error. A declared
 * Content-Length over it is refused before any of the body is read (`guardNodeServer` counts on that
 * to answer `Expect: 100-continue` without a 100).
 */
export function mcpBodyLimit(maxBodyBytes: number): MiddlewareHandler {
  return bodyLimit({
    maxSize: maxBodyBytes,
    // The rest of the body is never read, so the connection cannot be reused: say so, or a client's
    // next request on it would meet a reset. The server still reads and discards what the client
    // sends while it closes (guardNodeServer), so that the client can read this answer.
    onError: (c) =>
      c.json(error(ProtocolErrorCode.InvalidRequest, `Request body exceeds ${maxBodyBytes} bytes`), 413, {
        Connection: 'close',
      }),
  });
}

/** The Hono app: the MCP endpoint (and, for OAuth, its Protected Resource Metadata). */
export function createApp({
  dispatcher,
  log,
  auth,
  resourceMetadata,
  maxBodyBytes = 1_000_000,
  maxJsonDepth = 64,
  allowedOrigins = [],
  allowedHosts = [],
  keepAliveMs,
  path = '/mcp',
}: AppOptions): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.use('*', hostCheck({ allowedHosts }));
  app.use(path, originCheck({ allowedOrigins }));
  if (resourceMetadata !== undefined) {
    const serve = () =>
      new Response(JSON.stringify(resourceMetadata), { headers: { 'content-type': 'application/json' } });
    app.get('/.well-known/oauth-protected-resource', serve);
    app.get(`/.well-known/oauth-protected-resource${path}`, serve);
  }
  app.post(
    path,
    mcpBodyLimit(maxBodyBytes),
    authMiddleware(auth),
    mcpPost({
      dispatcher,
      principalOf: (c) => (c as unknown as { get(key: 'principal'): string }).get('principal'),
      log,
      maxJsonDepth,
      ...(keepAliveMs === undefined ? {} : { keepAliveMs }),
    }),
  );
  app.on(['GET', 'DELETE', 'PUT', 'PATCH'], path, (c) =>
    c.json(error(ProtocolErrorCode.InvalidRequest, 'Method not allowed'), 405, { Allow: 'POST' }),
  );
  app.onError((err, c) => {
    log.error('unhandled error', { error: String(err), stack: err.stack });
    return c.json(error(ProtocolErrorCode.InternalError, 'Internal error'), 500);
  });
  return app;
}
