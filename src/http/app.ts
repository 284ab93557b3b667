import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from '../log.ts';
import { ProtocolErrorCode } from '../core/errors.ts';
import { MCP_PATH } from '../core/wire.ts';
import { SIGNALS_PATH } from '../core/signal-delivery.ts';
import { authMiddleware, type AuthEnv, type AuthMiddlewareOptions } from './auth/middleware.ts';
import { artifactRoutes, type ArtifactRoutesOptions } from './artifacts.ts';
import { dashboardRoutes, type DashboardOptions } from './dashboard/routes.ts';
import { operationalRoutes, type OperationalOptions } from './health.ts';
import { signalRoutes, type SignalRoutesOptions } from './signals.ts';
import { TRIGGERS_PATH, triggerRoutes, type TriggerRoutesOptions } from './triggers.ts';
import { taskEventRoutes, type TaskEventRoutesOptions } from './task-events.ts';
import { hostCheck, originCheck } from './origin.ts';
import type { RevisionBinding, RevisionTransport } from '../protocol/revision.ts';
import { databaseUnavailableError, type IsDatabaseUnavailable } from '../core/unavailable.ts';
import { databaseUnavailable } from './unavailable.ts';

/** RFC 9728 Protected Resource Metadata, served when the server is an OAuth resource server. */
export interface ResourceMetadata {
  resource: string;
  authorization_servers: string[];
  bearer_methods_supported: string[];
  scopes_supported?: string[];
  resource_name?: string;
}

export interface AppOptions {
  /**
   * The protocol revisions the endpoint speaks, built for this app: a POST goes to the first that claims
   * it, or to the first of all (the newest, which answers what no revision claims, and a body nested too
   * deep to look at); a GET or DELETE to the first whose streams claim it, else 405.
   */
  revisions: (binding: RevisionBinding) => readonly [RevisionTransport, ...RevisionTransport[]];
  log: Logger;
  auth: AuthMiddlewareOptions;
  resourceMetadata?: ResourceMetadata | undefined;
  maxBodyBytes?: number;
  maxJsonDepth?: number;
  /** `POST /signals/{token}` (no auth: the token is the credential). */
  signals?: Pick<SignalRoutesOptions, 'deliver' | 'maxBytes'> | undefined;
  /** `POST /triggers/{name}` (no auth: each trigger verifies its sender's signature or token). */
  triggers?: Pick<TriggerRoutesOptions, 'triggers' | 'start' | 'maxBytes'> | undefined;
  allowedOrigins?: readonly string[];
  allowedHosts?: readonly string[];
  keepAliveMs?: number;
  path?: string;
  /** /healthz, /readyz and /metrics: what they report. */
  operational?: OperationalOptions | undefined;
  /** The operator's dashboard at /dashboard (off when undefined). */
  dashboard?: DashboardOptions | undefined;
  /** Downloads of tasks' artifacts at `{path}/artifacts/{taskId}/{name}` (off when undefined). */
  artifacts?: Pick<ArtifactRoutesOptions, 'artifacts' | 'metrics'> | undefined;
  /**
   * A task's events as text/event-stream at `{path}/tasks/{taskId}/events`, and the dashboard's live event
   * log (off when undefined). Keep-alives every `keepAliveMs`; `metrics` from `operational`.
   */
  taskEvents?: Pick<TaskEventRoutesOptions, 'reader' | 'tasks' | 'shutdown'> | undefined;
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

/**
 * The Hono app: the probes, the signal deliveries, the dashboard, the OAuth Protected Resource Metadata,
 * the MCP endpoint (each revision's transport), its artifact downloads and its task event streams.
 */
export function createApp(opts: AppOptions): Hono<AuthEnv> {
  const { log, maxJsonDepth = 64, path = MCP_PATH, maxBodyBytes = 1_000_000 } = opts;
  const { isDatabaseUnavailable = () => false } = opts;
  const principalOf = (c: Context) => (c as unknown as { get(key: 'principal'): string }).get('principal');
  const revisions = opts.revisions({
    principalOf,
    log,
    keepAliveMs: opts.keepAliveMs,
    maxJsonDepth,
    metrics: opts.operational?.metrics,
    isDatabaseUnavailable,
  });
  const app = new Hono<AuthEnv>();
  // The probes come first: no auth, any Host (load balancers and kubelets probe by address).
  app.route('/', operationalRoutes(opts.operational));
  app.use('*', hostCheck({ allowedHosts: opts.allowedHosts ?? [] }));
  if (opts.signals !== undefined) {
    app.route(SIGNALS_PATH, signalRoutes({ ...opts.signals, maxJsonDepth, log, isDatabaseUnavailable }));
  }
  if (opts.triggers !== undefined) {
    const triggers = triggerRoutes({
      ...opts.triggers,
      maxJsonDepth,
      log,
      metrics: opts.operational?.metrics,
      isDatabaseUnavailable,
      taskLocation: (taskId) => `${path}/tasks/${taskId}/events`,
    });
    app.route(TRIGGERS_PATH, triggers);
  }
  app.use(path, originCheck({ allowedOrigins: opts.allowedOrigins ?? [] }));
  const events = opts.taskEvents && {
    ...opts.taskEvents,
    keepAliveMs: opts.keepAliveMs ?? 15_000,
    log,
    metrics: opts.operational?.metrics,
  };
  if (opts.dashboard !== undefined) {
    app.get('/dashboard/', (c) => c.redirect('/dashboard', 301));
    app.route('/dashboard', dashboardRoutes({ ...opts.dashboard, events }));
  }
  if (opts.resourceMetadata !== undefined) serveResourceMetadata(app, path, opts.resourceMetadata);
  routeEndpoint(app, revisions, { path, maxBodyBytes, auth: opts.auth });
  if (opts.artifacts !== undefined) {
    app.use(`${path}/artifacts/*`, authMiddleware(opts.auth));
    app.route(`${path}/artifacts`, artifactRoutes({ ...opts.artifacts, principalOf, log }));
  }
  if (events !== undefined) {
    app.use(`${path}/tasks/*`, authMiddleware(opts.auth));
    app.route(`${path}/tasks`, taskEventRoutes({ ...events, principalOf }));
  }
  app.onError((err, c) => {
    if (isDatabaseUnavailable(err)) {
      return databaseUnavailable(c, log, err, { jsonrpc: '2.0', error: databaseUnavailableError().toJSON() });
    }
    log.error('unhandled error', { error: String(err), stack: err.stack });
    return c.json(error(ProtocolErrorCode.InternalError, 'Internal error'), 500);
  });
  return app;
}

/** RFC 9728 metadata, at the well-known path and at its form suffixed with the endpoint's path. */
function serveResourceMetadata(app: Hono<AuthEnv>, path: string, metadata: ResourceMetadata): void {
  const serve = () =>
    new Response(JSON.stringify(metadata), { headers: { 'content-type': 'application/json' } });
  app.get('/.well-known/oauth-protected-resource', serve);
  app.get(`/.well-known/oauth-protected-resource${path}`, serve);
}

/**
 * The one place that decides which revision a request speaks. A POST: the first revision that claims
 * it, else the first of all (the newest: it answers what no revision claims). A GET or DELETE: the first
 * revision whose streams claim it, else 405.
 */
function routeEndpoint(
  app: Hono<AuthEnv>,
  revisions: readonly [RevisionTransport, ...RevisionTransport[]],
  { path, maxBodyBytes, auth }: { path: string; maxBodyBytes: number; auth: AuthMiddlewareOptions },
): void {
  const [newest] = revisions;
  app.post(path, mcpBodyLimit(maxBodyBytes), authMiddleware(auth), async (c) => {
    const text = await c.req.text();
    const header = (name: string) => c.req.header(name);
    return (revisions.find((r) => r.claimsPost(header, text)) ?? newest).post(c, text);
  });
  const notAllowed = (c: Context) =>
    c.json(error(ProtocolErrorCode.InvalidRequest, 'Method not allowed'), 405, { Allow: 'POST' });
  const streamsOf = (c: Context) =>
    revisions.find((r) => r.streams?.claims((name) => c.req.header(name)) === true)?.streams;
  if (revisions.some((r) => r.streams !== undefined)) {
    const claimed: MiddlewareHandler = async (c, next) =>
      streamsOf(c) === undefined ? notAllowed(c) : next();
    app.get(path, claimed, authMiddleware(auth), (c) => streamsOf(c)!.get(c));
    app.delete(path, claimed, authMiddleware(auth), (c) => streamsOf(c)!.delete(c));
  }
  app.on(['GET', 'DELETE', 'PUT', 'PATCH'], path, notAllowed);
}
