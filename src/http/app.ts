import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from '../log.ts';
import type { Dispatcher } from '../protocol/dispatch.ts';
import { ProtocolErrorCode } from '../core/errors.ts';
import { MCP_PATH, PROTOCOL_VERSION } from '../core/wire.ts';
import { SIGNALS_PATH } from '../core/signal-delivery.ts';
import { authMiddleware, type AuthEnv, type AuthMiddlewareOptions } from './auth/middleware.ts';
import { artifactRoutes, type ArtifactRoutesOptions } from './artifacts.ts';
import { dashboardRoutes, type DashboardOptions } from './dashboard/routes.ts';
import { operationalRoutes, type OperationalOptions } from './health.ts';
import { jsonDepth } from '../protocol/envelope.ts';
import { signalRoutes, type SignalRoutesOptions } from './signals.ts';
import { mcpPost } from './mcp-route.ts';
import { hostCheck, originCheck } from './origin.ts';
import { databaseUnavailable, type IsDatabaseUnavailable } from './unavailable.ts';

/** RFC 9728 Protected Resource Metadata, served when the server is an OAuth resource server. */
export interface ResourceMetadata {
  resource: string;
  authorization_servers: string[];
  bearer_methods_supported: string[];
  scopes_supported?: string[];
  resource_name?: string;
}

/**
 * A protocol era served beside 2026-07-28 on the same endpoint, with its own transport: the 2025-11-25
 * sessions (src/rev2025-11-25), which the composition root builds and hands to the router, so that
 * nothing under src/http imports the era.
 */
export interface SessionTransport {
  /** Whether a POST speaks the era, from its headers and body. */
  claims(header: (name: string) => string | undefined, body: string): boolean;
  /** The header naming a session: a GET or DELETE without it is not the era's (405). */
  sessionHeader: string;
  post(c: Context, body: string): Promise<Response>;
  get(c: Context): Promise<Response>;
  delete(c: Context): Promise<Response>;
}

/** What the router gives the era's transport when it builds it. */
export interface SessionTransportBinding {
  principalOf: (c: Context) => string;
  log: Logger;
  keepAliveMs: number | undefined;
}

export interface AppOptions {
  dispatcher: Dispatcher;
  log: Logger;
  auth: AuthMiddlewareOptions;
  resourceMetadata?: ResourceMetadata | undefined;
  maxBodyBytes?: number;
  maxJsonDepth?: number;
  /** `POST /signals/{token}` (no auth: the token is the credential). */
  signals?: Pick<SignalRoutesOptions, 'deliver' | 'maxBytes'> | undefined;
  allowedOrigins?: readonly string[];
  allowedHosts?: readonly string[];
  keepAliveMs?: number;
  path?: string;
  /** Serves the 2025-11-25 era (sessions) beside 2026-07-28 on the same endpoint. */
  sessions?: ((binding: SessionTransportBinding) => SessionTransport) | undefined;
  /** /healthz, /readyz and /metrics: what they report. */
  operational?: OperationalOptions | undefined;
  /** The operator's dashboard at /dashboard (off when undefined). */
  dashboard?: DashboardOptions | undefined;
  /** Downloads of tasks' artifacts at `{path}/artifacts/{taskId}/{name}` (off when undefined). */
  artifacts?: Pick<ArtifactRoutesOptions, 'artifacts' | 'metrics'> | undefined;
  /**
   * Recognises an error of an unreachable database: such a request is answered 503 with Retry-After and
   * logged as a warning, not as an unhandled error (default: none is recognised).
   */
  isDatabaseUnavailable?: IsDatabaseUnavailable;
}

/** An error response to a request whose id was not read: no `id` (the 2026-07-28 schema allows no null). */
const error = (code: number, message: string) => ({ jsonrpc: '2.0' as const, error: { code, message } });

/**
 * The MCP endpoint's body limit: a body over `maxBodyBytes` gets a 413 JSON-RPC error. A declared
 * Content-Length over it is refused before any of the body is read (`guardNodeServer` counts on that
 * to answer `Expect: 100-continue` without a 100).
 */
export function mcpBodyLimit(maxBodyBytes: number): MiddlewareHandler {
  // The rest of the body is never read, so the connection cannot be reused: say so, or a client's
  // next request on it would meet a reset. The server still reads and discards what the client
  // sends while it closes (guardNodeServer), so that the client can read this answer.
  const tooLarge = (c: Context) =>
    c.json(error(ProtocolErrorCode.InvalidRequest, `Request body exceeds ${maxBodyBytes} bytes`), 413, {
      Connection: 'close',
    });
  const counting = bodyLimit({ maxSize: maxBodyBytes, onError: tooLarge });
  return (c, next) => {
    // A declared length is checked from the header alone, and the body is then read directly from the
    // socket (@hono/node-server's fast path). Hono's bodyLimit would first turn the request into a web
    // Request with a ReadableStream, which costs more than the rest of a small request's handling.
    const length = c.req.header('content-length');
    if (length !== undefined && c.req.header('transfer-encoding') === undefined) {
      return Number(length) > maxBodyBytes ? Promise.resolve(tooLarge(c)) : next();
    }
    // A chunked body has no declared size: counted as it streams in.
    return counting(c, next);
  };
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
  path = MCP_PATH,
  sessions: buildSessions,
  operational,
  dashboard,
  signals,
  artifacts,
  isDatabaseUnavailable = () => false,
}: AppOptions): Hono<AuthEnv> {
  const principalOf = (c: Context) => (c as unknown as { get(key: 'principal'): string }).get('principal');
  const sessions = buildSessions?.({ principalOf, log, keepAliveMs });
  const post = mcpPost({
    dispatcher,
    principalOf,
    log,
    maxJsonDepth,
    metrics: operational?.metrics,
    isDatabaseUnavailable,
    ...(keepAliveMs === undefined ? {} : { keepAliveMs }),
  });
  const app = new Hono<AuthEnv>();
  // The probes come first: no auth, any Host (load balancers and kubelets probe by address).
  app.route('/', operationalRoutes(operational));
  app.use('*', hostCheck({ allowedHosts }));
  if (signals !== undefined)
    app.route(SIGNALS_PATH, signalRoutes({ ...signals, maxJsonDepth, log, isDatabaseUnavailable }));
  app.use(path, originCheck({ allowedOrigins }));
  if (dashboard !== undefined) {
    app.get('/dashboard/', (c) => c.redirect('/dashboard', 301));
    app.route('/dashboard', dashboardRoutes(dashboard));
  }
  if (resourceMetadata !== undefined) {
    const serve = () =>
      new Response(JSON.stringify(resourceMetadata), { headers: { 'content-type': 'application/json' } });
    app.get('/.well-known/oauth-protected-resource', serve);
    app.get(`/.well-known/oauth-protected-resource${path}`, serve);
  }
  // The one place that decides which era a request speaks. A POST: 2026-07-28 unless the session
  // era claims it (a session id, or no 2026-07-28 envelope); a body too deep for either is answered by
  // the 2026-07-28 path, which refuses it.
  app.post(path, mcpBodyLimit(maxBodyBytes), authMiddleware(auth), async (c) => {
    const text = await c.req.text();
    if (
      sessions !== undefined &&
      c.req.header('mcp-protocol-version') !== PROTOCOL_VERSION &&
      jsonDepth(text) <= maxJsonDepth &&
      sessions.claims((name) => c.req.header(name), text)
    ) {
      return sessions.post(c, text);
    }
    return post(c, text);
  });
  if (artifacts !== undefined) {
    app.use(`${path}/artifacts/*`, authMiddleware(auth));
    app.route(`${path}/artifacts`, artifactRoutes({ ...artifacts, principalOf, log }));
  }
  const notAllowed = (c: Context) =>
    c.json(error(ProtocolErrorCode.InvalidRequest, 'Method not allowed'), 405, { Allow: 'POST' });
  if (sessions !== undefined) {
    // GET and DELETE exist in the session era only: without a session they are what 2026-07-28 says.
    const sessionOnly: MiddlewareHandler = async (c, next) =>
      c.req.header(sessions.sessionHeader) === undefined ||
      c.req.header('mcp-protocol-version') === PROTOCOL_VERSION
        ? notAllowed(c)
        : next();
    app.get(path, sessionOnly, authMiddleware(auth), (c) => sessions.get(c));
    app.delete(path, sessionOnly, authMiddleware(auth), (c) => sessions.delete(c));
  }
  app.on(['GET', 'DELETE', 'PUT', 'PATCH'], path, notAllowed);
  app.onError((err, c) => {
    if (isDatabaseUnavailable(err)) {
      const unavailable = error(ProtocolErrorCode.InternalError, 'The database is unavailable: retry later');
      return databaseUnavailable(c, log, err, unavailable);
    }
    log.error('unhandled error', { error: String(err), stack: err.stack });
    return c.json(error(ProtocolErrorCode.InternalError, 'Internal error'), 500);
  });
  return app;
}
